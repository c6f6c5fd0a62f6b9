"""JSONLDataset views (shuffle, select, skip, take, shard): semantics against a list model, composition,
pickling, and O(1) memory for everything except select."""

from __future__ import annotations

import pickle
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sjsonl import JSONLDataset
from sjsonl.sample import write_corpus
from sjsonl.sampling import ComposedMap, IdentityMap, Permutation, RangeMap

N = 203  # prime: every shard count leaves a remainder


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("views") / "data.jsonl"
    write_corpus(path, n_records=N, kind="short", seed=3)
    return path


@pytest.fixture(scope="module")
def ds(corpus):
    return JSONLDataset(corpus, index_dir=corpus.parent / "idx")


# ----------------------------------------------------------------- list model
def model_shuffle(ids, seed, epoch):
    p = Permutation(len(ids), seed=seed, epoch=epoch)
    return [ids[p[i]] for i in range(len(ids))]


def model_shard(ids, num, index, contiguous):
    if not contiguous:
        return ids[index::num]
    div, mod = divmod(len(ids), num)
    start = div * index + min(index, mod)
    return ids[start : start + div + (index < mod)]


def apply(view, ids, op):
    kind, args = op[0], op[1:]
    if kind == "shuffle":
        return view.shuffle(*args), model_shuffle(ids, *args)
    if kind == "select":
        idx = [i % len(ids) for i in args[0]] if ids else []
        return view.select(idx), [ids[i] for i in idx]
    if kind == "skip":
        return view.skip(args[0]), ids[max(0, args[0]) :]
    if kind == "take":
        return view.take(args[0]), ids[: max(0, args[0])]
    num, index, contiguous = args
    index %= num
    return view.shard(num, index, contiguous), model_shard(ids, num, index, contiguous)


ops = st.one_of(
    st.tuples(st.just("shuffle"), st.integers(0, 5), st.integers(0, 3)),
    st.tuples(st.just("select"), st.lists(st.integers(0, 10**6), max_size=40)),
    st.tuples(st.just("skip"), st.integers(-3, 250)),
    st.tuples(st.just("take"), st.integers(-3, 250)),
    st.tuples(st.just("shard"), st.integers(1, 7), st.integers(0, 6), st.booleans()),
)


def ids_of(records):
    return [r["id"] for r in records]


def check_view(view, expect):
    assert len(view) == len(expect)
    assert ids_of(view) == expect  # block-wise iteration (take() in blocks)
    assert [view[i]["id"] for i in range(len(view))] == expect  # scalar path
    assert ids_of(view[np.arange(len(view))]) == expect  # vectorised path
    assert ids_of(view[::-1]) == expect[::-1]
    if expect:
        assert view[-1]["id"] == expect[-1]
        assert view.raw(0).startswith(b"{") and view.raw(-1) == view.raw(len(view) - 1)


@settings(max_examples=80, deadline=None)
@given(chain=st.lists(ops, max_size=4))
def test_any_composition_matches_the_list_model(ds, chain):
    view, ids = ds, list(range(N))
    for op in chain:
        view, ids = apply(view, ids, op)
    check_view(view, ids)
    clone = pickle.loads(pickle.dumps(view))
    assert ids_of(clone) == ids


def test_shuffle_is_an_exact_reorder(ds):
    s = ds.shuffle(seed=1, epoch=0)
    ids = ids_of(s)
    assert sorted(ids) == list(range(N)) and ids != list(range(N))
    assert ids == ids_of(ds.shuffle(seed=1, epoch=0))
    assert ids != ids_of(ds.shuffle(seed=1, epoch=1))
    assert ids != ids_of(ds.shuffle(seed=2, epoch=0))
    # a shuffle of a view permutes the view's positions, not the base's
    sub = ds.skip(100)
    assert sorted(ids_of(sub.shuffle(seed=4))) == list(range(100, N))
    # shuffling twice composes two permutations
    twice = ids_of(s.shuffle(seed=1, epoch=0))
    p = Permutation(N, seed=1, epoch=0)
    assert twice == [ids[p[i]] for i in range(N)]


@pytest.mark.parametrize("num", [1, 2, 3, 7, N, N + 5])
@pytest.mark.parametrize("contiguous", [True, False])
def test_shards_partition_the_dataset(ds, num, contiguous):
    shuffled = ds.shuffle(seed=9)
    parts = [ids_of(shuffled.shard(num, i, contiguous=contiguous)) for i in range(num)]
    flat = [x for part in parts for x in part]
    assert sorted(flat) == list(range(N))
    sizes = [len(p) for p in parts]
    assert max(sizes) - min(sizes) <= 1
    if contiguous:
        assert flat == ids_of(shuffled)  # blocks in order
        assert sizes == sorted(sizes, reverse=True)  # the first N % num shards get one more


def test_shard_matches_huggingface_datasets(ds):
    import datasets  # a test dependency (sjsonl[hf])

    hf = datasets.Dataset.from_dict({"id": list(range(N))})
    for num in (1, 2, 3, 10):
        for index in range(num):
            for contiguous in (True, False):
                assert ids_of(ds.shard(num, index, contiguous)) == hf.shard(num, index, contiguous)["id"]
                # a view's shard: of its own positions (🤗: of a dataset that is that view)
                view = hf.select(range(7, N))
                assert (
                    ids_of(ds.skip(7).shard(num, index, contiguous))
                    == view.shard(num, index, contiguous)["id"]
                )


def test_shard_and_select_argument_errors(ds):
    with pytest.raises(ValueError):
        ds.shard(0, 0)
    with pytest.raises(ValueError):
        ds.shard(3, 3)
    with pytest.raises(IndexError):
        ds.select([0, N])
    with pytest.raises(IndexError):
        ds.shuffle()[N]
    with pytest.raises(IndexError):
        ds.take(5)[np.array([5])]


def test_views_keep_the_transform(ds):
    t = JSONLDataset(ds.files, record_transform=lambda r: r["id"] * 10)  # the per-record contract
    view = t.shuffle(seed=2).take(5)
    expect = [i * 10 for i in model_shuffle(list(range(N)), 2, 0)[:5]]
    assert list(view) == expect and view[np.arange(5)] == expect
    assert next(iter(ds.shuffle(seed=2)))["id"] * 10 == expect[0]


def test_views_over_several_files(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_corpus(a, n_records=50, seed=1)
    write_corpus(b, n_records=30, seed=2)
    ds = JSONLDataset([a, b])
    rows = [(r["id"], i >= 50) for i, r in enumerate(ds)]
    view = ds.shuffle(seed=5).shard(3, 1, contiguous=False)
    p = Permutation(80, seed=5)
    expect = [rows[p[i]] for i in range(1, 80, 3)]
    assert [r["id"] for r in view] == [e[0] for e in expect]
    assert sorted(r["id"] for r in ds.shuffle(seed=5)) == sorted(x for x, _ in rows)


def test_views_are_o1_memory(tmp_path):
    path = tmp_path / "big.jsonl"
    n = write_corpus(path, n_records=40_000, kind="short")
    ds = JSONLDataset(path)
    base_size = len(pickle.dumps(ds))
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        view = ds.shuffle(seed=1).skip(7).take(n - 100).shard(4, 1)
        view = view.shuffle(seed=2).shard(3, 2, contiguous=False)
        after, peak = tracemalloc.get_traced_memory()
        first = view[:3]
    finally:
        tracemalloc.stop()
    assert peak - before < 64 * 1024  # the offsets alone are 320 KB; no view copies anything n-sized
    assert after - before < 64 * 1024
    assert len(pickle.dumps(view)) - base_size < 2000  # a view pickles as a handful of integers
    assert len(first) == 3
    # select is the one view that stores its indices
    assert len(pickle.dumps(ds.select(np.arange(n)))) - base_size > 8 * n


def test_maps_over_a_trillion_records_stay_small():
    n = 10**12
    m = RangeMap(ComposedMap(IdentityMap(n), Permutation(n, seed=3)), 10, n - 10, 7)
    m = RangeMap(m, 5, len(m), 2)
    assert len(pickle.dumps(m)) < 1000
    vals = m.take(np.arange(1000))
    assert vals.min() >= 0 and vals.max() < n and len(set(vals.tolist())) == 1000
    assert m[999] == int(vals[999])


def test_iteration_of_a_view_crosses_block_boundaries(tmp_path):
    # the view iterator works in blocks of 8192; check the seams
    path = tmp_path / "d.jsonl"
    n = write_corpus(path, n_records=8192 * 2 + 5, kind="short")
    ds = JSONLDataset(path)
    view = ds.shuffle(seed=3)
    p = Permutation(n, seed=3)
    got = [r["id"] for r in view]
    assert got == p.take(np.arange(n)).tolist()
    assert [r["id"] for r in ds.skip(8190).take(5)] == list(range(8190, 8195))


def test_record_sizes_and_nbytes_are_the_views_own(tmp_path):
    """One meaning everywhere: a view's ``record_sizes()`` are its records' sizes in its order and ``nbytes``
    their sum; ``file_bytes`` is the files' size, the same for every view of them."""
    paths = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    paths[0].write_text('{"i": 0}\n{"i": 10}\n\n{"i": 200}\n')
    paths[1].write_text('{"i": 3000}\n')
    ds = JSONLDataset(paths)
    raw = {r["i"]: len(ds.raw(k)) + 1 for k, r in enumerate(ds)}  # the line and its "\n"
    raw[10] += 1  # the blank line after it belongs to its span
    for view in (ds, ds.shuffle(seed=5), ds.select([3, 0]), ds.shard(2, 1), ds.skip(1).take(2)):
        assert view.record_sizes().tolist() == [raw[r["i"]] for r in view]
        assert view.nbytes == sum(raw[r["i"]] for r in view)
        assert view.file_bytes == sum(p.stat().st_size for p in paths)
