"""Mixtures: interleave_datasets / concatenate_datasets — exact proportions, stopping rules, determinism
across processes, composition with views. Against 🤗's: tests/test_mixture_hf.py; with torch samplers
and exact resume: tests/test_mixture_torch.py."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sjsonl import JSONLDataset, concatenate_datasets, interleave_datasets
from sjsonl.errors import InvalidArgumentError
from sjsonl.sampling.schedule import InterleaveSchedule, weights_of

SIZES = {"web": 80_000, "code": 30_000, "chat": 12_000}
PROBS = [0.7, 0.2, 0.1]


def write_source(path: Path, name: str, n: int) -> str:
    with open(path, "w") as f:
        f.writelines(f'{{"src": "{name}", "i": {i}}}\n' for i in range(n))
    return str(path)


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("mixture")
    return {name: write_source(d / f"{name}.jsonl", name, n) for name, n in SIZES.items()}


def open_sources(paths: dict[str, str]) -> list[JSONLDataset]:
    return [JSONLDataset(p) for p in paths.values()]


def keys(records) -> list[tuple[str, int]]:
    return [(r["src"], r["i"]) for r in records]


# ----------------------------------------------------------------------------- the schedule
@pytest.mark.parametrize(
    "probabilities, weights",
    [
        ([0.7, 0.2, 0.1], [7, 2, 1]),
        ([1 / 3, 1 / 3, 1 / 3], [1, 1, 1]),
        ([3, 1], [3, 1]),
        ([0.5, 0, 0.5], [1, 0, 1]),
    ],
)
def test_weights_are_exact_for_simple_fractions(probabilities, weights):
    assert weights_of(probabilities).tolist() == weights


def test_weights_round_to_the_resolution_otherwise():
    w = weights_of([np.pi, np.e, 1.0])
    assert w.sum() == 1 << 20
    assert np.allclose(w / w.sum(), np.array([np.pi, np.e, 1.0]) / (np.pi + np.e + 1), atol=1e-6)


@pytest.mark.parametrize("bad", [[], [-1, 2], [0, 0], [float("nan"), 1]])
def test_bad_probabilities_are_refused(bad):
    with pytest.raises(ValueError, match="probabilities"):
        weights_of(bad)


@pytest.mark.parametrize("weights", [[1], [7, 2, 1], [5, 3, 11, 1], [1, 0, 2]])
@pytest.mark.parametrize("seed", [None, 0, 42])
def test_route_and_position_of_are_inverse(weights, seed):
    phases = None if seed is None else np.random.default_rng(seed).random(len(weights))
    s = InterleaveSchedule(weights, phases)
    draws = np.arange(5 * s.period + 3)
    k, j = s.route(draws)
    for src in range(len(weights)):
        mine = j[k == src]
        assert mine.tolist() == list(range(len(mine)))  # each source's draws are numbered in order
        assert [s.position_of(src, int(x)) for x in mine] == draws[k == src].tolist()
    assert s.route(draws[s.period :])[0].tolist() == k[: len(draws) - s.period].tolist()  # periodic


def test_schedule_pickles_without_its_period():
    s = InterleaveSchedule.from_probabilities([0.7, 0.2, 0.1], seed=3)
    t = pickle.loads(pickle.dumps(s))
    assert [a.tolist() for a in t.route(np.arange(100))] == [a.tolist() for a in s.route(np.arange(100))]


def test_hf_errors_are_mirrored(sources):
    a, b, _ = open_sources(sources)
    with pytest.raises(ValueError, match="not supported"):
        interleave_datasets([a, b], stopping_strategy="longest")
    with pytest.raises(ValueError, match="empty"):
        interleave_datasets([])
    with pytest.raises(ValueError, match="entries"):
        interleave_datasets([a, b], probabilities=[1.0])
    with pytest.raises(ValueError, match="probability is 0"):
        interleave_datasets([a, b], probabilities=[1.0, 0.0], stopping_strategy="all_exhausted")
    with pytest.raises(ValueError, match="empty"):
        interleave_datasets([a, b.take(0)], probabilities=[0.5, 0.5])
    with pytest.raises(ValueError, match="axis=0"):
        concatenate_datasets([a, b], axis=1)
    with pytest.raises(TypeError, match="sized, indexable"):
        interleave_datasets([a, 3])


# ----------------------------------------------------------------------------- proportions, stopping
def source_counts(mixture, n: int) -> np.ndarray:
    names = list(SIZES)
    src = np.array([names.index(r["src"]) for r in mixture.take(n)])
    return np.stack([np.cumsum(src == k) for k in range(len(names))], axis=1)  # prefix counts


@pytest.mark.parametrize("seed", [None, 0, 7])
def test_proportions_are_exact_at_every_prefix(sources, seed):
    mixture = interleave_datasets(open_sources(sources), probabilities=PROBS, seed=seed)
    counts = source_counts(mixture, 100_000)
    t = np.arange(1, 100_001)[:, None]
    deviation = np.abs(counts - t * np.array(PROBS))
    assert deviation.max() <= 2.0  # records, at every prefix length — no drift
    assert np.all(np.abs(counts[-1] / 100_000 - PROBS) < 0.005)


def test_first_exhausted_ends_with_the_first_source_to_run_out(sources):
    srcs = open_sources(sources)
    mixture = interleave_datasets(srcs, probabilities=PROBS, seed=1)
    ks = keys(mixture)
    counts = {name: sum(1 for s, _ in ks if s == name) for name in SIZES}
    last_src, last_i = ks[-1]
    assert last_i == SIZES[last_src] - 1 and counts[last_src] == SIZES[last_src]
    assert all(counts[name] < SIZES[name] for name in SIZES if name != last_src)
    assert len(set(ks)) == len(ks)  # nothing repeats before a source runs out


def test_all_exhausted_visits_every_record_of_every_source(sources):
    mixture = interleave_datasets(
        open_sources(sources), probabilities=PROBS, seed=2, stopping_strategy="all_exhausted"
    )
    ks = keys(mixture)
    assert set(ks) == {(name, i) for name, n in SIZES.items() for i in range(n)}
    # it stops with the draw that completes the last source's first pass
    assert ks[-1] not in set(ks[:-1])
    # the source that ends it is the slowest (code: 30,000 at 0.2); the others started over, in order
    assert ks[-1] == ("code", SIZES["code"] - 1)
    for name in ("web", "chat"):
        mine = [i for s, i in ks if s == name]
        assert mine[: SIZES[name]] == list(range(SIZES[name])) and mine[SIZES[name]] == 0


def test_reshuffle_each_pass_gives_every_pass_its_own_order(sources):
    web, code, chat_all = open_sources(sources)
    n = 2_000
    srcs = [web.take(40_000), code, chat_all.take(n)]  # chat runs out after ~20,000 draws, code after 150,000
    mixture = interleave_datasets(
        srcs, probabilities=PROBS, seed=5, stopping_strategy="all_exhausted", reshuffle_each_pass=True
    )
    chat = [i for s, i in keys(mixture) if s == "chat"]
    passes = [chat[p * n : (p + 1) * n] for p in range(len(chat) // n)]
    assert len(passes) >= 3
    assert all(sorted(p) == list(range(n)) for p in passes)  # each full pass is a permutation
    assert len({tuple(p[:50]) for p in passes}) == len(passes)  # and they differ
    again = interleave_datasets(
        srcs, probabilities=PROBS, seed=5, stopping_strategy="all_exhausted", reshuffle_each_pass=True
    )
    assert again[-100:] == mixture[-100:]


def test_a_tiny_probability_is_still_drawn():
    w = weights_of([0.5, 0.5 - 1e-9, 1e-9])  # below the 2⁻²⁰ resolution
    assert w.sum() == 1 << 20 and w[2] == 1
    with pytest.raises(ValueError, match="empty"):
        interleave_datasets([[1, 2], []], probabilities=[1, 1e-9])


@pytest.mark.slow  # (seconds: the fast tier stays within the README's 7 minutes)
def test_reshuffle_many_short_passes_in_one_block():
    tiny, big = [0, 1], list(range(100, 20_100))
    m = interleave_datasets(
        [tiny, big],
        probabilities=[0.5, 0.5],
        seed=1,
        reshuffle_each_pass=True,
        stopping_strategy="all_exhausted",
    )
    got = m[:]
    assert got == [m[i] for i in range(len(m))] == list(m)  # vectorised, scalar and iteration agree
    draws = [r for r in got if r < 100]
    assert all(
        sorted(draws[p : p + 2]) == [0, 1] for p in range(0, len(draws) - 1, 2)
    )  # each pass a permutation


def test_fill_missing_and_column_names(sources):
    a = JSONLDataset(next(iter(sources.values()))).take(3)
    m = concatenate_datasets([a, [{"other": 1}]], fill_missing=True)
    assert m.column_names == ["src", "i", "other"]
    assert m[-1] == {"src": None, "i": None, "other": 1} == list(m)[-1] == m[[3]][0]
    assert m[0] == {"src": "web", "i": 0, "other": None}
    nested = concatenate_datasets([m, a])
    assert nested.column_names == ["src", "i", "other"]  # from the mixture's own columns, no pass


def test_repeat_upsamples_a_source(sources):
    web, _, chat = open_sources(sources)
    small = chat.take(5).repeat(3)
    assert [r["i"] for r in small] == [0, 1, 2, 3, 4] * 3 and len(chat.take(5).repeat(0)) == 0
    for bad in (2.7, True, -1):
        with pytest.raises(ValueError, match="num_times"):
            chat.repeat(bad)
    mixture = concatenate_datasets([web.take(2), small])
    assert len(mixture) == 17 and mixture[-1] == {"src": "chat", "i": 4}


# ----------------------------------------------------------------------------- views, access, processes
def test_views_and_access_paths_agree(sources):
    mixture = interleave_datasets(open_sources(sources), probabilities=PROBS, seed=3)
    everything = mixture[:]
    assert list(mixture) == everything and mixture[-1] == everything[-1]
    idx = np.random.default_rng(0).integers(0, len(mixture), 500)
    assert mixture[idx] == [everything[i] for i in idx] == mixture.__getitems__(idx.tolist())
    shuffled = mixture.shuffle(seed=9)
    assert sorted(keys(shuffled)) == sorted(keys(everything)) and keys(shuffled) != keys(everything)
    shards = [mixture.shard(3, r) for r in range(3)]
    assert [x for s in shards for x in keys(s)] == keys(everything)
    assert mixture.skip(10).take(5)[:] == everything[10:15]
    batches = mixture.take(10).batch(4)
    assert [b["i"] for b in batches] == [
        [r["i"] for r in everything[lo : min(lo + 4, 10)]] for lo in (0, 4, 8)
    ]
    k, j = mixture.source_of(123)
    assert mixture.sources[k][j] == everything[123]
    path, line = mixture.locate(123)  # one structure everywhere: (file, line), as JSONLDataset.locate
    assert (path, line) == mixture.sources[k].locate(j) and path.endswith(".jsonl")
    with pytest.raises(InvalidArgumentError, match="source_of"):
        concatenate_datasets([[1, 2], [3]]).locate(2)
    with pytest.raises(IndexError, match="out of range"):
        mixture[len(mixture)]
    nested = interleave_datasets([mixture.take(30), concatenate_datasets([[{"src": "x", "i": 0}]])])
    assert len(nested) == 2 and nested[:2] == [everything[0], {"src": "x", "i": 0}]


def sequence_digest(paths: list[str], seed: int) -> str:
    mixture = interleave_datasets([JSONLDataset(p) for p in paths], probabilities=PROBS, seed=seed)
    return json.dumps(keys(mixture.take(20_000)))


def test_same_seed_same_sequence_in_another_process(sources):
    paths = list(sources.values())
    here = sequence_digest(paths, seed=11)
    out = subprocess.run(
        [sys.executable, __file__, "digest", json.dumps(paths), "11"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == here
    assert sequence_digest(paths, seed=12) != here


def test_pickled_mixture_reads_the_same(sources):
    mixture = interleave_datasets(open_sources(sources), probabilities=PROBS, seed=4).shuffle(seed=1)
    clone = pickle.loads(pickle.dumps(mixture))
    assert clone[:1000] == mixture[:1000]


if __name__ == "__main__":
    print(sequence_digest(json.loads(sys.argv[2]), int(sys.argv[3])))
