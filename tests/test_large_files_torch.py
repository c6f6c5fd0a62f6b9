"""Records past 4 GiB through the torch DistributedSampler and DataLoader (see tests/test_large_files.py)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from sjsonl.torch import DistributedSampler, collate_records  # noqa: E402

from ._large_file import beyond  # noqa: E402

pytestmark = pytest.mark.slow  # the >4 GiB file takes 10-20 s to build (tests/_large_file.py)


def test_the_torch_sampler_and_loader_read_records_past_4_gib(file_past_4_gib):
    _, _, ds, _ = file_past_4_gib
    tail = ds.select(beyond())
    seen = []
    for rank in range(2):
        sampler = DistributedSampler(tail, num_replicas=2, rank=rank, shuffle=True, seed=1)
        loader = torch.utils.data.DataLoader(tail, batch_size=4, sampler=sampler, collate_fn=collate_records)
        seen += [int(i) for b in loader for i in b["i"]]
    assert sorted(seen) == beyond()  # each record once over the 2 ranks (200 records: no padding)
