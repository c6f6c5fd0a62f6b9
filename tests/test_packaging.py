"""sjsonl as a user gets it: the sdist and wheel ``python -m build`` makes from a checkout, each installed
into a fresh venv (the wheel as built; the sdist with no C compiler) that runs the README's quickstart in a
temp directory.

Slow (a build and two venvs, ~1-2 minutes): the venvs install numpy & co. through pip's cache, pinned by
constraints-test.txt so they are the wheels the test environment already fetched.
"""

from __future__ import annotations

import importlib.machinery
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from email.parser import HeaderParser
from pathlib import Path
from types import SimpleNamespace

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
C_SOURCES = (
    "src/sjsonl/index/_newlines.c",
    "src/sjsonl/index/_packed.c",
    "src/sjsonl/storage/_guarded.c",
    "src/sjsonl/records/_utf8.c",
    "src/sjsonl/data/_hot.c",
    "src/sjsonl/data/packing/_plan.c",
    "src/sjsonl/records/_types.c",
)
#: The compiled modules of a wheel built by this interpreter (the build runs under it).
EXTENSIONS = tuple(
    f"sjsonl/{module}{importlib.machinery.EXTENSION_SUFFIXES[0]}"
    for module in (
        "index/_newlines",
        "index/_packed",
        "storage/_guarded",
        "records/_utf8",
        "data/_hot",
        "data/packing/_plan",
        "records/_types",
    )
)
#: What a working checkout has beside its files; none of it may reach the sdist or the wheel.
LEFTOVERS = {
    ".venv/bin/python": b"#!/bin/sh\n",
    "benchmarks/.data/corpus.jsonl": b'{"id": 0}\n',
    "tests/data/sample.jsonl": b'{"id": 0}\n',
    f"src/sjsonl/index/_newlines{importlib.machinery.EXTENSION_SUFFIXES[0]}": b"\x7fELF stale build",
    "src/sjsonl/__pycache__/dataset.cpython-311.pyc": b"stale bytecode",
    "build/lib/sjsonl/old.py": b"stale = True\n",
}
#: The README's quickstart (its first Python block), then what the test compares: where sjsonl was
#: imported from, which compiled parts run, how the data file is read, and every record.
QUICKSTART = re.search(r"```python\n(.*?)```", (REPO / "README.md").read_text(), flags=re.S)
PROBE = """
import hashlib, json, sjsonl
from sjsonl.index import packed, scan
from sjsonl.data import dataset
from sjsonl.records import decode, fast_types
from sjsonl.storage import local
print(json.dumps({
    "file": sjsonl.__file__,
    "version": sjsonl.__version__,
    "compiled": {"scan": scan.NATIVE is not None, "packed": packed.NATIVE is not None,
                 "guarded": local.GUARDED is not None, "utf8": decode.NATIVE_UTF8 is not None,
                 "hot": dataset.HOT is not None, "types": fast_types.NATIVE is not None},
    "storage": type(ds._files[0].storage).__name__,
    "records": hashlib.sha256(json.dumps(list(ds)).encode()).hexdigest(),
    "backwards": hashlib.sha256(json.dumps([ds[i] for i in range(len(ds) - 1, -1, -1)]).encode()).hexdigest(),
}))
"""


def source_version() -> str:
    """``__version__`` as written in this checkout's ``src/sjsonl/_version.py``."""
    found = re.search(r'^__version__ = "([^"]+)"$', (REPO / "src/sjsonl/_version.py").read_text(), re.M)
    assert found, "no __version__ literal in src/sjsonl/_version.py"
    return found.group(1)


def user_env(**extra: str) -> dict[str, str]:
    """This environment without what points Python at the checkout or steers sjsonl (tests set both)."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV") and not key.startswith("SJSONL_")
    }
    env.update(extra)
    return env


def run(*command: object, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        env=user_env() if env is None else env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, (
        f"{command} exited {proc.returncode}:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    )
    return proc


def fresh_venv(where: Path) -> Path:
    """``python -m venv`` (from the interpreter under the venv the tests run in); its python."""
    run(sys.executable, "-m", "venv", where, cwd=where.parent)
    return where / "bin" / "python"


def pip_install(python: Path, target: Path, env: dict[str, str] | None = None) -> None:
    """The venv's own pip, its cache on, dependencies from the registry at the test environment's pins."""
    pins = REPO / "constraints-test.txt"
    run(python, "-m", "pip", "install", "-q", "-c", pins, target, cwd=target.parent, env=env)


def run_quickstart(python: Path, where: Path) -> SimpleNamespace:
    """The quickstart as a script in the empty directory ``where``: its output lines and the probe."""
    assert QUICKSTART, "README.md has no ```python block"
    where.mkdir()
    (where / "quickstart.py").write_text(QUICKSTART.group(1) + PROBE)
    *printed, probe = run(python, "quickstart.py", cwd=where).stdout.splitlines()
    return SimpleNamespace(printed=printed, probe=json.loads(probe))


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> SimpleNamespace:
    """A copy of this checkout's files (committed or new, not ignored) with the leftovers of work in it,
    so the build sees a real working tree but never writes into this one (egg-info, build/)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.decode()
    root = tmp_path_factory.mktemp("checkout")
    files = sorted(name for name in listed.split("\0") if name and (REPO / name).is_file())
    for name in files:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, root / name)
    for name, content in LEFTOVERS.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(content)
    return SimpleNamespace(root=root, files=files)


@pytest.fixture(scope="module")
def dists(checkout, tmp_path_factory) -> SimpleNamespace:
    """``python -m build`` as a release would run it: the sdist, then the wheel built from that sdist."""
    out = tmp_path_factory.mktemp("dist")
    run(sys.executable, "-m", "build", "--outdir", out, checkout.root, cwd=checkout.root)
    (sdist,) = out.glob("*.tar.gz")
    (wheel,) = out.glob("*.whl")
    return SimpleNamespace(sdist=sdist, wheel=wheel)


@pytest.fixture(scope="module")
def wheel_venv(dists, tmp_path_factory) -> Iterator[Path]:
    """A fresh venv with the wheel installed; removed after the module (numpy & co. are large)."""
    root = tmp_path_factory.mktemp("wheel-venv")
    python = fresh_venv(root / "venv")
    pip_install(python, dists.wheel)
    yield python
    shutil.rmtree(root / "venv")


@pytest.fixture(scope="module")
def compiled_quickstart(wheel_venv, tmp_path_factory) -> SimpleNamespace:
    return run_quickstart(wheel_venv, tmp_path_factory.mktemp("wheel-run") / "work")


@pytest.fixture(scope="module")
def no_compiler_venv(dists, tmp_path_factory) -> Iterator[Path]:
    """A fresh venv with the wheel built from the unpacked sdist where no C compiler runs (CC=false: every
    compile fails). Built by ``python -m build``, not by pip, which would keep that wheel in its cache."""
    root = tmp_path_factory.mktemp("no-compiler")
    with tarfile.open(dists.sdist) as tar:
        tar.extractall(root, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    (unpacked,) = root.iterdir()
    no_compiler = user_env(CC="false", CXX="false")
    run(
        sys.executable,
        "-m",
        "build",
        "--wheel",
        "--outdir",
        root / "dist",
        unpacked,
        cwd=root,
        env=no_compiler,
    )
    (wheel,) = (root / "dist").glob("*.whl")
    python = fresh_venv(root / "venv")
    pip_install(python, wheel)
    yield python
    shutil.rmtree(root / "venv")


def test_sdist_holds_what_building_needs_and_nothing_else(dists, checkout):
    with tarfile.open(dists.sdist) as tar:
        members = [member.name.split("/", 1) for member in tar.getmembers() if member.isfile()]
    assert {top for top, _ in members} == {dists.sdist.name.removesuffix(".tar.gz")}
    names = {name for _, name in members}
    # setup.py and the C sources and stubs it needs, by name first (the clearest failure)
    for needed in (
        "setup.py",
        "pyproject.toml",
        "README.md",
        "LICENSE",
        *C_SOURCES,
        "src/sjsonl/storage/_guarded.pyi",
        "src/sjsonl/records/_utf8.pyi",
        "src/sjsonl/data/_hot.pyi",
        "src/sjsonl/data/packing/_plan.pyi",
        "src/sjsonl/records/_types.pyi",
    ):
        assert needed in names, f"{needed} is missing from {dists.sdist.name}"
    # every file of the package in the checkout, and besides it only the build files and metadata
    package = {name for name in checkout.files if name.startswith("src/sjsonl/")}
    assert package <= names, f"missing from the sdist: {sorted(package - names)}"
    build_files = {
        "setup.py",
        "setup.cfg",
        "pyproject.toml",
        "MANIFEST.in",
        "README.md",
        "LICENSE",
        "PKG-INFO",
    }
    metadata = {name for name in names if name.startswith("src/sjsonl.egg-info/")}
    unexpected = sorted(names - package - metadata - build_files)  # tests, benchmarks, venvs, .so, bytecode
    assert not unexpected, f"should not ship in the sdist: {unexpected[:20]}"


def test_wheel_holds_the_compiled_extensions_stubs_and_py_typed(dists, checkout):
    names = set(zipfile.ZipFile(dists.wheel).namelist())
    missing = [name for name in EXTENSIONS if name not in names]
    assert not missing, f"{dists.wheel.name} has no {missing}"
    package = {
        name.removeprefix("src/")
        for name in checkout.files
        if name.startswith("src/sjsonl/") and name.endswith((".py", ".pyi", "py.typed"))
    }
    assert "sjsonl/py.typed" in package and "sjsonl/storage/_guarded.pyi" in package
    assert package <= names, f"missing from the wheel: {sorted(package - names)}"
    dist_info = f"sjsonl-{source_version()}.dist-info/"
    # besides the package only its metadata: no C sources (they are in the sdist), no tests, no leftovers
    unexpected = sorted(name for name in names - package - set(EXTENSIONS) if not name.startswith(dist_info))
    assert not unexpected, f"should not ship in the wheel: {unexpected[:20]}"
    metadata = HeaderParser().parsestr(zipfile.ZipFile(dists.wheel).read(dist_info + "METADATA").decode())
    required = {re.split(r"[ ;<>=!~\[]", spec, maxsplit=1)[0] for spec in metadata.get_all("Requires-Dist")}
    assert {"numpy", "orjson", "msgspec", "xxhash"} <= required


def test_the_wheel_installs_in_a_fresh_venv_and_runs_the_quickstart(wheel_venv, compiled_quickstart):
    venv = wheel_venv.parent.parent
    imported = Path(compiled_quickstart.probe["file"])
    assert imported.is_relative_to(venv) and "site-packages" in imported.parts, imported
    assert compiled_quickstart.printed[:2] == ["50000", "10929 49999"]
    assert compiled_quickstart.probe["compiled"] == {
        "scan": True,
        "packed": True,
        "guarded": True,
        "utf8": True,
        "hot": True,
        "types": True,
    }
    assert compiled_quickstart.probe["storage"] == "MappedFile"


def test_without_a_c_compiler_the_sdist_installs_and_the_pure_fallbacks_give_the_same_records(
    no_compiler_venv, compiled_quickstart, tmp_path
):
    pure = run_quickstart(no_compiler_venv, tmp_path / "work")
    venv = no_compiler_venv.parent.parent
    assert Path(pure.probe["file"]).is_relative_to(venv)
    assert not list(venv.glob("lib/python*/site-packages/sjsonl/**/*.so"))  # nothing was compiled
    assert pure.probe["compiled"] == {
        "scan": False,
        "packed": False,
        "guarded": False,
        "utf8": False,
        "hot": False,
        "types": False,
    }
    assert pure.probe["storage"] == "LocalFile"  # read with pread: no unguarded map
    assert pure.printed == compiled_quickstart.printed
    assert (pure.probe["records"], pure.probe["backwards"]) == (
        compiled_quickstart.probe["records"],
        compiled_quickstart.probe["backwards"],
    )


def test_version_has_one_source_and_both_commands_print_it(dists, wheel_venv, compiled_quickstart, tmp_path):
    version = source_version()
    assert dists.wheel.name.startswith(f"sjsonl-{version}-")
    assert dists.sdist.name == f"sjsonl-{version}.tar.gz"
    assert compiled_quickstart.probe["version"] == version
    script = wheel_venv.parent / "sjsonl"
    for command in ([script, "--version"], [wheel_venv, "-m", "sjsonl", "--version"]):
        assert run(*command, cwd=tmp_path).stdout.strip() == f"sjsonl {version}", command
