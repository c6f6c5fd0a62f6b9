"""examples/torch_ddp_mixture.py runs as documented: stopped mid-epoch and resumed, its losses equal an
uninterrupted run's bit for bit (helpers: tests/_examples.py)."""

from __future__ import annotations

import pytest

pytest.importorskip("torchdata")

from ._examples import real_sources, stop_and_resume

pytestmark = pytest.mark.slow  # a full training run and a stopped-and-resumed one: a minute or more


def test_torch_ddp_loss_after_resume_equals_an_uninterrupted_run(shared_data, tmp_path):
    sources = real_sources(shared_data)
    full, resumed = stop_and_resume("torch_ddp_mixture.py", sources, tmp_path, steps=180, stop=90)
    assert full["steps_per_epoch"] < 180  # the run crosses an epoch boundary after the restart
    assert len(full["losses"]) == len(resumed["losses"]) == 180
    assert resumed["losses"] == full["losses"]  # exactly: same batches, same order, same arithmetic
    assert full["losses"][-1] < full["losses"][0]  # and it learns
