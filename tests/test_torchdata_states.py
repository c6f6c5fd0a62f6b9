"""Checkpoints of torchdata's ``StatefulDistributedSampler`` (``{"yielded": n}``, nothing else) load into
``sjsonl.torch.DistributedSampler`` as "this sampler's own configuration, n indices in", with one
``UncheckedStateWarning``; every other partial or mismatched state is still refused.

The states are a real torchdata sampler's (torchdata 0.11). With ``shuffle=False`` both samplers give torch's
order, so what ours hands out after the resume is compared with what torchdata's own would have."""

from __future__ import annotations

import warnings

import pytest

pytest.importorskip("torch")
pytest.importorskip("torchdata")

from torchdata.stateful_dataloader import StatefulDataLoader
from torchdata.stateful_dataloader.sampler import StatefulDistributedSampler

from sjsonl import UncheckedStateWarning
from sjsonl.torch import DistributedSampler


def load(sampler: DistributedSampler, state: dict) -> list[warnings.WarningMessage]:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        sampler.load_state_dict(state)
    return list(seen)


def test_torchdatas_own_test_the_sixth_sample_after_yielded_5():
    """torchdata's test: ``load_state_dict({"yielded": 5})``, then the first sample is an uninterrupted
    run's 6th — for their sampler and, with the same setup, for ours."""
    dataset = list(range(100))
    theirs = StatefulDistributedSampler(dataset, num_replicas=10, rank=0, shuffle=False)
    uninterrupted = list(theirs)
    theirs.load_state_dict({"yielded": 5})
    assert next(iter(theirs)) == uninterrupted[5]
    for shuffle in (False, True):
        ours = DistributedSampler(dataset, num_replicas=10, rank=0, shuffle=shuffle)
        whole = list(ours)
        seen = load(ours, {"yielded": 5})
        assert [w.category for w in seen] == [UncheckedStateWarning]
        assert list(ours) == whole[5:]
        assert whole[5] == (uninterrupted[5] if not shuffle else whole[5])


@pytest.mark.parametrize("epoch", [0, 3])
def test_a_real_torchdata_samplers_state_resumes_where_it_would(epoch):
    theirs = StatefulDistributedSampler(range(50), num_replicas=3, rank=2, shuffle=False)
    theirs.set_epoch(epoch)
    it = iter(theirs)
    head = [next(it) for _ in range(7)]
    state = theirs.state_dict()
    rest = list(it)
    assert state == {"yielded": 7}
    ours = DistributedSampler(range(50), num_replicas=3, rank=2, shuffle=False)
    seen = load(ours, state)
    ours.set_epoch(epoch)  # after the load, as a training loop does: the resume follows it (as theirs)
    assert list(ours) == rest
    assert head + rest == list(ours)  # only the first pass after the load resumes
    assert len(seen) == 1
    message = str(seen[0].message)
    assert "no identity to check" in message and "7 indices into the next pass" in message
    assert "n=50" in message and "num_replicas=3" in message and "rank=2" in message


def test_a_shuffled_resume_follows_the_epoch_set_after_loading():
    ours = DistributedSampler(range(40), num_replicas=2, rank=0, seed=9)
    ours.set_epoch(6)
    whole = list(ours)
    fresh = DistributedSampler(range(40), num_replicas=2, rank=0, seed=9)
    load(fresh, {"yielded": 4})
    fresh.set_epoch(6)
    assert fresh.epoch == 6 and list(fresh) == whole[4:]
    # a state that names its epoch is this sampler's own: set_epoch to another one drops it
    again = DistributedSampler(range(40), num_replicas=2, rank=0, seed=9)
    assert [w.category for w in load(again, {"yielded": 4, "epoch": 6})] == [UncheckedStateWarning]
    assert again.epoch == 0 and list(again) == whole[4:] and again.epoch == 6
    load(again, {"yielded": 4, "epoch": 6})
    again.set_epoch(7)
    assert len(list(again)) == len(again) == 20


def test_a_torchdata_loader_checkpoint_resumes_with_our_sampler():
    """A user switching samplers mid-project: the StatefulDataLoader checkpoint made with torchdata's
    sampler, loaded into a loader whose sampler is ours, continues with exactly torchdata's next batches."""
    data = list(range(100))

    def loader(cls):
        return StatefulDataLoader(
            data, batch_size=4, sampler=cls(data, num_replicas=2, rank=1, shuffle=False)
        )

    before = loader(StatefulDistributedSampler)
    before.sampler.set_epoch(1)
    it = iter(before)
    _ = [next(it) for _ in range(3)]
    checkpoint = before.state_dict()
    rest = [b.tolist() for b in it]
    after = loader(DistributedSampler)
    after.sampler.set_epoch(1)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        after.load_state_dict(checkpoint)
        got = [b.tolist() for b in after]
    assert got == rest
    assert [w.category for w in seen if issubclass(w.category, UncheckedStateWarning)] == [
        UncheckedStateWarning
    ]


def test_a_finished_torchdata_pass_resumes_as_an_empty_one():
    ours = DistributedSampler(range(10), num_replicas=2, rank=0, shuffle=False)
    load(ours, {"yielded": 5})
    ours.set_epoch(1)
    assert list(ours) == [] and len(list(ours)) == 5


@pytest.mark.parametrize(
    "state",
    [
        {"yielded": 6},  # past this rank's pass (5)
        {"yielded": -1},
        {"yielded": "2"},
        {"yielded": True},
        {"yielded": 2, "epoch": -1},
        {"yielded": 2, "epoch": 1.0},
        {"epoch": 1},  # no yielded
        {"yielded": 2, "samples_yielded": 2},  # not torchdata's sampler state, nor ours
        {"yielded": 2, "epoch": 0, "n": 10},  # partly ours: the rest of its identity is missing
        {
            "yielded": 2,
            "epoch": 0,
            "n": 11,
            "shuffle": False,
            "seed": 0,
            "num_replicas": 2,
            "rank": 0,
            "drop_last": False,
        },
        {},
    ],
)
def test_other_partial_or_mismatched_states_stay_refused(state):
    ours = DistributedSampler(range(10), num_replicas=2, rank=0, shuffle=False)
    whole = list(ours)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # and no warning before the refusal
        with pytest.raises(ValueError, match="cannot resume"):
            ours.load_state_dict(state)
    assert list(ours) == whole  # nothing pending
