"""The block shuffle (``ds.block_shuffle`` / :class:`sjsonl.sampling.BlockShuffle`): every record exactly
once per epoch, deterministic for a seed, different across seeds and epochs, reads in blocks, and a view
like the others (shard, skip, pickle, resume)."""

from __future__ import annotations

import itertools
import pickle

import numpy as np
import pytest

from sjsonl import JSONLDataset
from sjsonl.errors import InvalidArgumentError, RecordIndexError
from sjsonl.sampling import BlockShuffle


@pytest.mark.parametrize(
    "n, block, window",
    list(itertools.product([0, 1, 2, 9, 64, 1000, 1001, 4097], [1, 3, 64, 5000], [1, 2, 7])),
)
def test_every_position_visits_every_record_once(n, block, window):
    s = BlockShuffle(n, block, window, seed=11, epoch=2)
    order = s.take(np.arange(n)).tolist()
    assert sorted(order) == list(range(n)) and len(s) == n
    if n:
        picks = np.random.default_rng(n).integers(-n, n, 40)
        assert [s[int(i)] for i in picks] == [order[int(i)] for i in picks]  # scalar == vectorised
        assert s.take(picks[picks >= 0]).tolist() == [order[int(i)] for i in picks[picks >= 0]]


def test_deterministic_and_keyed_by_seed_and_epoch():
    pos = np.arange(5000)
    base = BlockShuffle(5000, 16, 4, seed=1).take(pos)
    assert (BlockShuffle(5000, 16, 4, seed=1).take(pos) == base).all()
    assert pickle.loads(pickle.dumps(BlockShuffle(5000, 16, 4, seed=1))) == BlockShuffle(5000, 16, 4, seed=1)
    for other in (BlockShuffle(5000, 16, 4, seed=2), BlockShuffle(5000, 16, 4, seed=1, epoch=1)):
        assert (other.take(pos) != base).mean() > 0.9


def test_records_come_in_windows_of_whole_blocks():
    n, block, window = 10_000, 50, 4
    order = BlockShuffle(n, block, window, seed=3).take(np.arange(n))
    for w in range(0, n, block * window):
        blocks = np.unique(order[w : w + block * window] // block)
        assert len(blocks) == window  # the window's records are exactly its blocks' records
        assert sorted(order[w : w + block * window].tolist()) == sorted(
            itertools.chain.from_iterable(range(b * block, (b + 1) * block) for b in blocks.tolist())
        )
    # within windows, records are shuffled, not left in file order
    assert (np.diff(order) == 1).mean() < 0.1


def test_short_last_block_lands_anywhere():
    n, block = 1003, 10  # the last block holds 3 records
    slots = [
        int(np.flatnonzero(BlockShuffle(n, block, 1, seed=s).take(np.arange(n)) >= 1000)[0])
        for s in range(30)
    ]
    assert len(set(slots)) > 10


def test_quality_against_the_exact_shuffle():
    # the numbers the module documents, on a smaller n: global displacement as an exact shuffle's,
    # file neighbours kept within a window
    n, block, window = 200_000, 64, 16
    order = BlockShuffle(n, block, window, seed=0).take(np.arange(n))
    position = np.empty(n, dtype=np.int64)
    position[order] = np.arange(n)
    assert abs(np.abs(position - np.arange(n)).mean() / n - 1 / 3) < 0.02
    close = (np.abs(np.diff(position)) <= block * window).mean()
    assert close >= (block - 1) / block - 0.01


def test_a_dataset_view_shards_skips_pickles_and_reads_every_record(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text("".join(f'{{"i": {i}}}\n' for i in range(3001)))
    ds = JSONLDataset(path)
    view = ds.block_shuffle(seed=5, epoch=1, block_size=32, window=8)
    got = [r["i"] for r in view]
    assert sorted(got) == list(range(3001))
    assert got == [r["i"] for r in pickle.loads(pickle.dumps(view))]
    assert got != [r["i"] for r in ds.block_shuffle(seed=5, epoch=2, block_size=32, window=8)]
    shards = [[r["i"] for r in view.shard(3, k)] for k in range(3)]
    assert list(itertools.chain(*shards)) == got  # contiguous shards split the order
    assert [r["i"] for r in view.skip(1234)] == got[1234:]  # resuming from a position
    assert [r["i"] for r in view[[5, 0, 3000]]] == [got[5], got[0], got[3000]]
    odd = ds.select(range(1, 3001, 2)).block_shuffle(seed=0, block_size=10)  # of a view: its positions
    assert sorted(r["i"] for r in odd) == list(range(1, 3001, 2))


def test_torch_style_resume_through_iter_positions(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text("".join(f"{i}\n" for i in range(500)))
    view = JSONLDataset(path).block_shuffle(seed=1, block_size=16, window=4)
    assert list(view.iter_positions(np.arange(200, 500))) == list(view)[200:]


def test_bad_arguments():
    for bad in ({"block_size": 0}, {"block_size": 2, "window": 0}, {"block_size": True}):
        with pytest.raises(InvalidArgumentError):
            BlockShuffle(10, **bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        BlockShuffle(-1, 4)
    with pytest.raises(RecordIndexError):
        BlockShuffle(10, 4)[10]
    with pytest.raises(RecordIndexError):
        BlockShuffle(10, 4).take(np.array([3, 10]))


# (n, block_size, window, seed, epoch) -> records at positions: pinned, as the exact shuffle's are in
# tests/test_permutation.py (a change reorders every saved run that used a block shuffle)
BLOCK_GOLDEN = [
    ((10, 3, 2, 0, 0), list(range(10)), [0, 8, 7, 2, 1, 6, 3, 4, 5, 9]),
    ((1000, 16, 4, 1, 0), [0, 1, 2, 3, 500, 998, 999], [611, 618, 190, 767, 367, 672, 282]),
    ((1001, 64, 2, 11, 2), [0, 1, 2, 3, 500, 999, 1000], [437, 662, 440, 703, 25, 80, 577]),
    (
        (100000, 256, 64, 0, 1),
        [0, 1, 2, 3, 50000, 99998, 99999],
        [28453, 23916, 50126, 28025, 90527, 2634, 81031],
    ),
]


@pytest.mark.parametrize(("args", "positions", "expected"), BLOCK_GOLDEN, ids=lambda v: str(v)[:24])
def test_golden_block_orders(args, positions, expected):
    s = BlockShuffle(*args)
    assert s.take(np.array(positions)).tolist() == expected and [s[i] for i in positions] == expected
