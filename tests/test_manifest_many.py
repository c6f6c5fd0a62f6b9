"""A corpus of more small files than a process may map (see tests/test_manifest.py for the manifest)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sjsonl import JSONLDataset


@pytest.mark.slow
def test_more_small_files_than_a_process_may_map_are_all_read(tmp_path: Path) -> None:
    """70,000 files, over the 65,530 maps a Linux process may hold (vm.max_map_count): every file is read
    (small files with pread, not mapped), after a first open and after a reopen from the manifest."""
    files = 70_000
    paths = [str(tmp_path / f"p{k:05d}.jsonl") for k in range(files)]
    for k, p in enumerate(paths):
        with open(p, "wb") as f:
            f.write(b'{"k": %d}\n' % k)
    for _ in range(2):  # the first open, then a reopen
        ds = JSONLDataset(paths)
        assert ds[:: files // 7] == [{"k": k} for k in range(0, files, files // 7)]
        assert [r["k"] for r in ds] == list(range(files))
