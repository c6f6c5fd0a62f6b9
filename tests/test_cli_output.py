"""The files the command line writes (``filter -o``, ``stats --plot``, ``demo --dir``): never an input or one
of its index files, never an existing file without ``--force``, always whole (:mod:`sjsonl.cli.output`);
and ``filter`` writes valid JSON Lines, whatever its input's layout."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import zipfile

import pytest

import sjsonl.cli.expr
from sjsonl import JSONLDataset
from sjsonl.cli import main
from sjsonl.storage.atomic import atomic_output

from .test_cli import SCRIPT, cli

LINES = [
    b'{"id": 0, "text": "caf\\u00e9",   "tags": ["a"]}',
    b'{"id":1,"text":"plain"}',
    b'{"id": 2, "text": "\xe6\x97\xa5\xe6\x9c\xac"}',
]


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"\n".join(LINES) + b"\n")
    assert cli("index", path).returncode == 0  # the index exists before the refused command runs
    return path


def state(directory):
    """Every file under ``directory``: its bytes and inode (a replaced file has a new inode)."""
    out = {}
    for root, _, names in os.walk(directory):
        for name in names:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                with open(path, "rb") as f:
                    out[os.path.relpath(path, directory)] = (os.fstat(f.fileno()).st_ino, f.read())
    return out


def assert_refused(out, *says):
    assert out.returncode == 2 and out.stdout == "", (out.returncode, out.stdout, out.stderr)
    assert out.stderr.startswith("sjsonl: error: ") and out.stderr.count("\n") == 1, out.stderr
    assert all(s in out.stderr for s in says), out.stderr


# ------------------------------------------------------------------ refusals
def _alias(tmp_path, data, how):
    """(the -o argument, the working directory) naming ``data`` in the way ``how`` says."""
    if how == "same path":
        return data, None
    if how == "relative":
        return "in.jsonl", tmp_path
    if how == "dotted":
        (tmp_path / "sub").mkdir()
        return tmp_path / "sub" / ".." / "." / "in.jsonl", None
    if how == "symlink":
        (tmp_path / "link.jsonl").symlink_to(data)
        return tmp_path / "link.jsonl", None
    if how == "symlinked directory":
        (tmp_path / "dir").symlink_to(tmp_path, target_is_directory=True)
        return tmp_path / "dir" / "in.jsonl", None
    assert how == "hard link"
    os.link(data, tmp_path / "other.jsonl")
    # a new link changes the data's ctime: the next open writes the index again with the new stamp (its
    # bytes hash the same), which is sjsonl's own upkeep, not the command writing over its input
    JSONLDataset(data)
    return tmp_path / "other.jsonl", None


@pytest.mark.parametrize("force", [False, True])
@pytest.mark.parametrize(
    "how", ["same path", "relative", "dotted", "symlink", "symlinked directory", "hard link"]
)
def test_filter_never_writes_its_input(tmp_path, data, how, force):
    target, cwd = _alias(tmp_path, data, how)
    before = state(tmp_path)
    out = cli("filter", data, "id == 0", "-o", target, *(["--force"] if force else []), cwd=cwd)
    assert_refused(out, f"refusing to write -o {target}: it is the input;")
    assert state(tmp_path) == before


def test_a_relative_input_and_an_absolute_output(tmp_path, data):
    out = cli("filter", "in.jsonl", "True", "-o", data, "--force", cwd=tmp_path)
    assert_refused(out, "it is the input")


@pytest.mark.parametrize(
    "name, what",
    [
        ("in.index.npy", "the index"),
        ("in.index.packed", "the index"),
        ("in.index.seekpoints", "the seek points"),
        ("in.index.badlines", "the bad-lines file"),
        ("in.index.schema", "the schema file"),
        ("in.index.meta.json", "the index metadata"),
    ],
)
def test_filter_never_writes_an_index_file_of_its_input(tmp_path, data, name, what):
    before = state(tmp_path)
    out = cli("filter", data, "True", "-o", tmp_path / name, "--force")
    assert_refused(out, f"it is {what} of the input {data};")
    assert state(tmp_path) == before


def test_links_to_the_index_and_an_index_directory(tmp_path, data):
    (tmp_path / "ix.jsonl").symlink_to(tmp_path / "in.index.npy")
    os.link(tmp_path / "in.index.npy", tmp_path / "hard.jsonl")
    (tmp_path / "dangling.jsonl").symlink_to(tmp_path / "in.index.schema")  # not written yet: by its name
    before = state(tmp_path)
    for target in ("ix.jsonl", "hard.jsonl"):
        assert_refused(cli("filter", data, "True", "-o", tmp_path / target, "--force"), "it is the index of")
    out = cli("filter", data, "True", "-o", tmp_path / "dangling.jsonl", "--force")
    assert_refused(out, "it is the schema file of the input")
    # with --index-dir the index is kept there (and one may still be beside the data): both refused
    index_dir = tmp_path / "indexes"
    assert cli("index", data, "--index-dir", index_dir).returncode == 0
    [kept] = [p for p in index_dir.iterdir() if p.name.endswith(".index.npy")]
    for target in (kept, tmp_path / "in.index.npy"):
        out = cli("filter", data, "True", "-o", target, "--force", "--index-dir", index_dir)
        assert_refused(out, "it is the index of the input")
    assert {k: v for k, v in state(tmp_path).items() if not k.startswith("indexes")} == before


@pytest.mark.parametrize("member", ["", "::a.jsonl", "::b.json"])
def test_filter_never_writes_the_archive_of_a_zip_input(tmp_path, member):
    archive = tmp_path / "t.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("a.jsonl", b"\n".join(LINES) + b"\n")
        z.writestr("b.json", '[\n  {"id": 7}\n]\n')
    (tmp_path / "link.zip").symlink_to(archive)
    before = archive.read_bytes()
    for target in (archive, tmp_path / "link.zip"):
        out = cli("filter", f"{archive}{member}", "True", "-o", target, "--force")
        assert_refused(out, f"refusing to write -o {target}: it is the archive of the input {archive}::")
    # the index of a member sits beside the archive: refused too
    indexes = [p for p in tmp_path.iterdir() if p.name.endswith(".index.npy")]
    assert len(indexes) == (2 if member == "" else 1)
    for index in indexes:
        out = cli("filter", f"{archive}{member}", "True", "-o", index, "--force")
        assert_refused(out, "it is the index of the input")
    assert archive.read_bytes() == before


def test_an_existing_output_is_replaced_only_with_force(tmp_path, data):
    out_path = tmp_path / "out.jsonl"
    out_path.write_text("mine\n")
    out_path.chmod(0o600)
    assert_refused(cli("filter", data, "True", "-o", out_path), f"-o {out_path} exists; pass --force")
    assert out_path.read_text() == "mine\n"
    # a symlink to a user's file is an existing output as well
    (tmp_path / "link.jsonl").symlink_to(out_path)
    assert_refused(cli("filter", data, "True", "-o", tmp_path / "link.jsonl"), "exists; pass --force")
    assert out_path.read_text() == "mine\n"
    done = cli("filter", data, "id == 1", "-o", tmp_path / "link.jsonl", "--force")
    assert done.returncode == 0, done.stderr
    # written through the link, keeping the file's permissions; the link stays a link
    assert out_path.read_bytes() == LINES[1] + b"\n" and (out_path.stat().st_mode & 0o777) == 0o600
    assert (tmp_path / "link.jsonl").is_symlink()
    assert_refused(cli("filter", data, "True", "-o", tmp_path), "is a directory; give a file name")
    # a FIFO (like /dev/null, a device: never tried here, a broken guard would replace it as root)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert_refused(cli("filter", data, "True", "-o", fifo, "--force"), f"-o {fifo} is not a regular file")
    assert fifo.is_fifo()


@pytest.mark.slow  # (seconds: the fast tier stays within the README's 7 minutes)
def test_stats_plot_never_writes_an_input_nor_over_a_file_without_force(tmp_path, data):
    (tmp_path / "link.png").symlink_to(data)
    os.link(data, tmp_path / "hard.png")
    (tmp_path / "index.png").symlink_to(tmp_path / "in.index.npy")
    JSONLDataset(data)  # the index written again for the link's new ctime (sjsonl's upkeep, see _alias)
    before = state(tmp_path)
    for name in ("link.png", "hard.png", "index.png"):
        out = cli("stats", data, "--plot", tmp_path / name, "--force")
        assert_refused(out, f"refusing to write --plot {tmp_path / name}: it is the ")
    assert_refused(cli("stats", data, "--plot", tmp_path / "p.jsonl"), "matplotlib cannot write .jsonl")
    assert state(tmp_path) == before
    png = tmp_path / "s.png"
    png.write_bytes(b"mine")
    assert_refused(cli("stats", data, "--plot", png), f"--plot {png} exists; pass --force")
    assert png.read_bytes() == b"mine"
    out = cli("stats", data, "--plot", png, "--force")
    assert out.returncode == 0 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_demo_takes_a_new_name_and_never_touches_an_existing_sample(tmp_path):
    mine = tmp_path / "sample.jsonl"
    mine.write_text('{"mine": true}\n')
    orphan = tmp_path / "sample-1.index.npy"  # an index kept for sample-1.jsonl: that name is taken too
    orphan.write_bytes(b"not to be touched")
    before = state(tmp_path)
    out = cli("demo", "--dir", tmp_path, "--records", 500)
    assert out.returncode == 0, out.stderr
    new = tmp_path / "sample-2.jsonl"
    assert f"-> {new} (sample.jsonl is taken: a new name)" in out.stdout
    assert {k: v for k, v in state(tmp_path).items() if k in before} == before
    assert len(new.read_text().splitlines()) == 500 and (tmp_path / "sample-2.index.npy").exists()


# ------------------------------------------------------------------ atomic writes
def _leftovers(directory):
    return sorted(n for n in os.listdir(directory) if n.endswith(".tmp") or ".tmp-" in n)


def test_ctrl_c_while_filtering_leaves_the_old_output(tmp_path, monkeypatch, capsys):
    data = tmp_path / "big.jsonl"
    data.write_text("".join(json.dumps({"i": i, "pad": "x" * 100}) + "\n" for i in range(5000)))
    out_path = tmp_path / "out.jsonl"
    out_path.write_text("old\n")
    seen = []

    def interrupted(record):
        seen.append(record)
        if len(seen) == 4000:  # after most of the output has gone to the temp file
            raise KeyboardInterrupt
        return True

    monkeypatch.setattr(sjsonl.cli.expr, "compile_expr", lambda expr: interrupted)
    assert main(["filter", str(data), "True", "-o", str(out_path), "--force"]) == 130
    assert out_path.read_text() == "old\n" and _leftovers(tmp_path) == []


def _limited(max_bytes):
    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, max_bytes))

    return limit


@pytest.mark.slow  # (seconds: the fast tier stays within the README's 7 minutes)
@pytest.mark.parametrize("command", ["filter", "stats"])
def test_a_write_that_fails_midway_leaves_the_old_file(tmp_path, command):
    data = tmp_path / "big.jsonl"
    data.write_text("".join(json.dumps({"i": i, "pad": "x" * 100}) + "\n" for i in range(2000)))
    assert cli("index", data).returncode == 0  # only the output is written below
    target = tmp_path / ("out.jsonl" if command == "filter" else "plot.svg")
    target.write_text("old\n")
    args = (
        ["filter", data, "True", "-o", target] if command == "filter" else ["stats", data, "--plot", target]
    )
    # a file size limit of 20 kB: the output (about 240 kB) cannot be written whole (EFBIG)
    out = subprocess.run(
        [str(SCRIPT), *map(str, args), "--force"], capture_output=True, text=True, preexec_fn=_limited(20_000)
    )
    # (matplotlib may warn first that it could not save its font cache, under the same limit)
    message = out.stderr.splitlines()[-1]
    assert (
        out.returncode == 1 and message == f"sjsonl: error: cannot write {args[-2]} {target}: File too large"
    )
    assert target.read_text() == "old\n" and _leftovers(tmp_path) == []


def test_atomic_output_never_replaces_when_told_not_to(tmp_path):
    path = str(tmp_path / "out.txt")
    (tmp_path / "out.txt.old.tmp").write_text("a user's file")  # not a temp file of ours: kept
    with pytest.raises(FileExistsError), atomic_output(path, replace=False) as f:
        f.write(b"new")
        with open(path, "w") as other:
            other.write("appeared meanwhile")
    with open(path) as f:
        assert f.read() == "appeared meanwhile"
    assert sorted(os.listdir(tmp_path)) == ["out.txt", "out.txt.old.tmp"]


# ------------------------------------------------------------------ valid JSON Lines
def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def output_records(path):
    """The records of a JSON Lines file, read with the standard library: every line must parse."""
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b""
    return [json.loads(line) for line in lines[:-1]]


EDGE_ELEMENTS = [
    '{\n  "nested": {\n    "list": [\n      1,\n      {"s": "line\\nbreak, ] and }"}\n    ]\n  }\n}',
    '"a string, with a comma"',
    "3",
    "[\n  [],\n  {}\n]",
    "null",
    '{"big":\n  1180591620717411303424}',  # beyond 64 bits: orjson cannot write it
    '{"inf": 1e400}',  # json.loads reads inf; orjson would write null
    '{"surrogate": "\\ud800",\n "emoji": "\\ud83d\\ude00"}',  # a lone surrogate: orjson refuses it
    '{"dup": 1,\n "dup": 2}',
    '{\r\n  "crlf": true\r\n}',
]


def test_filter_writes_a_pretty_printed_json_array_as_one_line_per_record(tmp_path):
    path = tmp_path / "pretty.json"
    path.write_text("[\n  " + ",\n  ".join(EDGE_ELEMENTS) + "\n]\n")
    expected = load(path)
    out_path = tmp_path / "out.jsonl"
    out = cli("filter", path, "True", "-o", out_path)
    assert out.returncode == 0 and out.stdout.startswith(
        f"{len(expected)} of {len(expected)} records matched"
    )
    assert output_records(out_path) == expected
    assert out_path.read_bytes().startswith(b'{"nested":{"list":[1,{"s":"line\\nbreak, ] and }"}]}}\n')


def test_filter_on_a_real_corpus_pretty_printed(tmp_path, shared_data):
    source = shared_data / "jsonl/clue/pCLUE_train_9.json"
    rows = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines()]
    path = tmp_path / "pclue.json"
    path.write_text(json.dumps(rows, indent=2, ensure_ascii=False), encoding="utf-8")
    expected = load(path)
    out_path = tmp_path / "out.jsonl"
    out = cli("filter", path, "type == 'nli'", "-o", out_path)
    assert out.returncode == 0, out.stderr
    assert output_records(out_path) == [r for r in expected if r["type"] == "nli"]


def test_filter_field_selected_lists(tmp_path, shared_data):
    # a real SQuAD-style document: the rows are the list under "data" (read in place: indexes elsewhere)
    source = shared_data / "jsonl/jglue/jsquad_valid-v1.3.json"
    out_path = tmp_path / "out.jsonl"
    out = cli("filter", source, "True", "--field", "data", "-o", out_path, "--index-dir", tmp_path / "ix")
    assert out.returncode == 0, out.stderr
    assert output_records(out_path) == load(source)["data"]
    # and pretty-printed, with the edge cases
    path = tmp_path / "doc.json"
    path.write_text('{\n  "version": 2,\n  "rows": [\n    ' + ",\n    ".join(EDGE_ELEMENTS) + "\n  ]\n}\n")
    out = cli("filter", path, "True", "--field", "rows", "-o", out_path, "--force")
    assert out.returncode == 0, out.stderr
    assert output_records(out_path) == load(path)["rows"]


def test_json_lines_keep_their_bytes_next_to_documents(tmp_path):
    """A zip of a JSON Lines member (bytes kept, spacing and escapes included) and a pretty-printed array;
    a ``.json`` file that is JSON Lines of arrays keeps its bytes too."""
    archive = tmp_path / "t.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("a.jsonl", b"\n".join(LINES) + b"\n")
        z.writestr("b.json", "[\n  " + ",\n  ".join(EDGE_ELEMENTS) + "\n]")
    out_path = tmp_path / "out.jsonl"
    assert cli("filter", archive, "True", "-o", out_path).returncode == 0
    with zipfile.ZipFile(archive) as z:
        expected = [json.loads(line) for line in LINES] + json.loads(z.read("b.json"))
    assert output_records(out_path) == expected
    assert out_path.read_bytes().startswith(b"\n".join(LINES) + b"\n")
    arrays = tmp_path / "arrays.json"
    arrays.write_bytes(b'[1,  2]\n[ "x" ]\n')
    assert cli("filter", arrays, "True", "-o", out_path, "--force").returncode == 0
    assert out_path.read_bytes() == arrays.read_bytes()


def test_printed_records_with_a_lone_surrogate(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'["\\ud800", "caf\\u00e9"]\n')
    for args in (["head"], ["get", "--compact"], ["get"], ["sample", "-n", "1"]):
        out = cli(*args[:1], path, *args[1:], *(["0"] if args[0] == "get" else []))
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout) == ["\ud800", "café"]
