"""Clean exits and bounded memory, as users run it: a compressed dataset held at module level in a plain
script, indexing under ``ulimit -v``, and the memory an index build takes as the file grows."""

from __future__ import annotations

import bz2
import gzip
import os
import subprocess
import sys
import textwrap

import pytest


def _run(code: str, cwd, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "SJSONL_INDEX_DIR"}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


@pytest.mark.parametrize("suffix", [".gz", ".bz2"])
def test_a_compressed_dataset_held_at_module_level_exits_cleanly(tmp_path, suffix):
    """rapidgzip's and indexed_bzip2's native threads must be gone before the interpreter finalizes:
    left running, they abort it (SIGABRT) after the script has printed its results."""
    data = b"".join(b'{"i": %d, "text": "%s"}\n' % (i, b"x" * 40) for i in range(100_000))
    packed = gzip.compress(data) if suffix == ".gz" else bz2.compress(data)
    (tmp_path / f"d.jsonl{suffix}").write_bytes(packed)
    script = f"""
        import sjsonl
        ds = sjsonl.JSONLDataset("d.jsonl{suffix}")
        print(len(ds), ds[99_999]["i"])
    """
    for run in ("index built", "index reused"):
        done = _run(script, tmp_path)
        assert (done.returncode, done.stdout.split()) == (0, ["100000", "99999"]), (run, done.stderr[-2000:])


@pytest.mark.slow
@pytest.mark.parametrize("suffix", [".gz", ".bz2"])
def test_indexing_a_bomb_under_ulimit_v_is_one_memory_error_naming_the_file(tmp_path, suffix):
    records = 25_000_000 if suffix == ".gz" else 8_000_000  # (bz2 is slow to write and read)
    lines = b"0\n" * records  # 4 bytes of offsets a record, from a file of some KB
    packed = gzip.compress(lines, 1) if suffix == ".gz" else bz2.compress(lines, 1)
    del lines
    path = tmp_path / f"bomb.jsonl{suffix}"
    path.write_bytes(packed)
    done = _run(
        """
        import resource, sys
        import sjsonl, sjsonl.storage.compressed, sjsonl.storage.bzip2
        size = [int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmSize")][0]
        limit = (size << 10) + int(sys.argv[2]) // 2  # more than now, less than the offsets need
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        sjsonl.JSONLDataset(sys.argv[1])
        """,
        tmp_path,
        str(path),
        str(records * 4),
    )
    assert done.returncode == 1, (done.returncode, done.stderr[-3000:])  # not -6 (abort) or -11 (segv)
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"MemoryError: out of memory indexing {path}"), done.stderr[-3000:]


_PEAK = """
    import sys
    def status(key):
        return [int(line.split()[1]) for line in open("/proc/self/status") if line.startswith(key)][0] << 10
    import sjsonl
    base = status("VmRSS")
    ds = sjsonl.JSONLDataset(sys.argv[1])
    print(status("VmHWM") - base)
"""


@pytest.mark.slow
def test_an_index_build_takes_about_the_index_itself_plus_a_constant(tmp_path):
    """Peak memory grows with the index by about its own size (offsets appended in place), not twice it
    (every part held, then their concatenation)."""
    peaks = {}
    for records in (10_000_000, 30_000_000):
        path = tmp_path / f"{records}.jsonl"
        path.write_bytes(b"0\n" * records)
        peaks[records] = int(_run(_PEAK, tmp_path, str(path)).stdout)
        path.unlink()
    slope = (peaks[30_000_000] - peaks[10_000_000]) / (20_000_000 * 4)  # bytes of memory per index byte
    assert slope < 1.4, peaks
