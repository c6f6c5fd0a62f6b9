"""A corpus of many files (scaled down from the billion-record benchmark, benchmarks/bench_billion.py):
every read checked against the generator — random ds[i], a shuffled view's first records, shards, the
torch sampler (tests/test_many_files_torch.py) — and ds.locate gives each record's file and line. Real
files, real indexes."""

from __future__ import annotations

import numpy as np
import pytest

from sjsonl import JSONLDataset, build_indexes
from sjsonl.sampling import Permutation

FILES, RECORDS = 40, 5_000


def value_of(k, j):
    return (7919 * k + j) % 9000 + 1000


def write_corpus(tmp_path_factory) -> list[str]:
    """FILES files of RECORDS numbers each, indexed."""
    root = tmp_path_factory.mktemp("many")
    paths = []
    for k in range(FILES):
        path = root / f"part-{k:03d}.jsonl"
        path.write_text("".join(f"{value_of(k, j)}\n" for j in range(RECORDS)))
        paths.append(str(path))
    build_indexes(paths, progress=False)
    return paths


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory)


def expected(base):
    base = np.asarray(base)
    return value_of(base // RECORDS, base % RECORDS).tolist()


def test_random_reads_and_a_shuffled_view_match_the_generator(corpus):
    ds = JSONLDataset(corpus)
    n = FILES * RECORDS
    assert len(ds) == n
    picks = np.random.default_rng(0).integers(0, n, 2_000)
    assert [ds[int(i)] for i in picks] == expected(picks)
    assert ds[picks] == expected(picks)  # one batched read across files
    first = [r for _, r in zip(range(3_000), ds.shuffle(seed=5))]
    assert first == expected(Permutation(n, 5).take(np.arange(3_000)))
    shard = ds.shard(7, 3)  # contiguous, as 🤗's: records [lo, lo + len)
    lo = (n // 7) * 3 + min(3, n % 7)
    assert [shard[i] for i in (0, 1, len(shard) - 1)] == expected([lo, lo + 1, lo + len(shard) - 1])


def test_locate_gives_the_file_and_line(corpus, tmp_path):
    ds = JSONLDataset(corpus)
    assert ds.locate(0) == (corpus[0], 1)
    assert ds.locate(RECORDS * 7 + 41) == (corpus[7], 42)
    assert ds.locate(-1) == (corpus[-1], RECORDS)
    view = ds.select([RECORDS * 3 + 9, 5])
    assert view.locate(0) == (corpus[3], 10) and view.locate(1) == (corpus[0], 6)
    gaps = tmp_path / "gaps.jsonl"  # lines are counted: blank lines move them away from record numbers
    gaps.write_text('{"a": 1}\n\n\n{"a": 2}\n')
    assert JSONLDataset(gaps).locate(1) == (str(gaps), 4)
    with pytest.raises(IndexError):
        ds.locate(len(ds))
