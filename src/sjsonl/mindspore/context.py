"""MindSpore's context, read where sjsonl's MindSpore sources need it: the seed ``mindspore.dataset.config``
holds, the shard of this process in a distributed run, and the one check of a ``(num_shards, shard_id)`` pair.
Nothing here imports MindSpore until called.
"""

from __future__ import annotations

from sjsonl.errors import InvalidArgumentError

# What mindspore.dataset.config.get_seed() answers when set_seed was never called (std::mt19937's default).
_MT19937_DEFAULT_SEED = 5489


def configured_seed() -> int | None:
    """MindSpore's ``config.set_seed`` value, or None when it was never called."""
    from mindspore.dataset import config

    return None if config.get_seed() == _MT19937_DEFAULT_SEED else int(config.get_seed())


def check_shard(num_shards: int | None, shard_id: int | None) -> tuple[int, int]:
    if (num_shards is None) != (shard_id is None):
        raise InvalidArgumentError("give num_shards and shard_id together")
    if num_shards is None:
        return 1, 0
    if num_shards < 1 or not 0 <= shard_id < num_shards:  # type: ignore[operator]
        raise InvalidArgumentError(f"shard_id {shard_id} must lie in [0, {num_shards})")
    return num_shards, shard_id  # type: ignore[return-value]


def distributed_defaults(num_shards: int | None, shard_id: int | None) -> tuple[int | None, int | None]:
    """``(group size, rank)`` when ``mindspore.communication.init()`` has run and no shard was given."""
    if num_shards is not None or shard_id is not None:
        return num_shards, shard_id
    from mindspore.communication.management import GlobalComm, get_group_size, get_rank

    if GlobalComm.INITED and get_group_size() > 1:
        return get_group_size(), get_rank()
    return None, None
