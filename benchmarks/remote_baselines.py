"""MosaicML ``streaming`` and LitData on the remote benchmark's corpora and server (``bench_remote.py``).

Both need packages that cannot share sjsonl's environment (Mosaic pins ``numpy<2.2``), so ``make bench``
installs them into ``.venv-baselines`` and ``bench_remote.py`` runs this script there, in a process of its
own per step:

- ``convert TOOL SRC OUT`` — the conversion each tool needs before training (not timed as part of an
  epoch): the JSON Lines file ``SRC`` into MDS shards (Mosaic's ``MDSWriter``, one ``json`` column, its
  default 64 MB shards) or LitData chunks (``optimize``, its default 64 MB chunks) in ``OUT``; prints the
  seconds it took. ``bench_remote.py`` uploads ``OUT`` to the S3 server.
- ``epoch TOOL URL ENDPOINT CACHE RECORDS`` — the first ``RECORDS`` records of a shuffled epoch (each tool's
  default shuffle, seed 0) through a ``DataLoader`` with 4 workers and batch 64 (LitData's own
  ``StreamingDataLoader``), from an empty local cache ``CACHE``; prints ``{"rate": records/s, "first":
  seconds to the first batch}`` as JSON.

The records come out as dicts, as sjsonl gives them. Mosaic imports ``torchvision`` for its vision datasets
(unused here); where the installed ``torchvision`` cannot load (PyPI's Linux wheel needs CUDA's torch
libraries, and this machine's registry has no CPU build), it is replaced by an empty stand-in.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import time
from typing import Any

WORKERS, BATCH = 4, 64


def _stub_torchvision() -> None:
    """An empty ``torchvision`` (any name is a class) when the real one cannot load."""
    import importlib.abc
    import importlib.machinery
    import types

    try:
        import torchvision  # noqa: F401

        return
    except (ImportError, RuntimeError):
        for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[name]

    class Anything(types.ModuleType):
        def __init__(self, name: str) -> None:
            super().__init__(name)
            self.__path__: list[str] = []

        def __getattr__(self, name: str) -> Any:
            if name.startswith("__"):
                raise AttributeError(name)
            return type(name, (), {"__init__": lambda self, *a, **k: None})

    class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
            if name == "torchvision" or name.startswith("torchvision."):
                return importlib.machinery.ModuleSpec(name, self, is_package=True)
            return None

        def create_module(self, spec: Any) -> Any:
            return Anything(spec.name)

        def exec_module(self, module: Any) -> None:
            pass

    sys.meta_path.insert(0, Finder())


def _ids(batch: list[Any]) -> list[int]:
    return [r["record"]["id"] if "record" in r else r["id"] for r in batch]


def convert(tool: str, src: str, out: str) -> float:
    t0 = time.perf_counter()
    if tool == "mosaic":
        _stub_torchvision()
        from streaming import MDSWriter

        with MDSWriter(out=out, columns={"record": "json"}) as writer, open(src, "rb") as f:
            for line in f:
                if line.strip():
                    writer.write({"record": json.loads(line)})
    else:
        from litdata import optimize

        with open(src, "rb") as f:
            lines = [line for line in f if line.strip()]
        optimize(fn=_parse, inputs=lines, output_dir=out, chunk_bytes="64MB", num_workers=1, mode="overwrite")
    return time.perf_counter() - t0


def _parse(line: bytes) -> dict:
    return json.loads(line)  # type: ignore[no-any-return]


def epoch(tool: str, url: str, endpoint: str, cache: str, records: int) -> tuple[float, float]:
    import torch

    if tool == "mosaic":
        _stub_torchvision()
        from streaming import StreamingDataset
        from streaming.base.util import clean_stale_shared_memory

        clean_stale_shared_memory()
        os.environ["S3_ENDPOINT_URL"] = endpoint
        ds: Any = StreamingDataset(remote=url, local=cache, shuffle=True, shuffle_seed=0, batch_size=BATCH)
        loader: Any = torch.utils.data.DataLoader(ds, batch_size=BATCH, num_workers=WORKERS, collate_fn=_ids)
    else:
        import obstore.store
        from litdata import StreamingDataLoader, StreamingDataset

        real = obstore.store.S3Store  # LitData fetches chunks with obstore, which refuses http:// unless told

        def s3_store(*args: Any, **kwargs: Any) -> Any:
            kwargs["client_options"] = {**(kwargs.get("client_options") or {}), "allow_http": True}
            return real(*args, **kwargs)

        obstore.store.S3Store = s3_store  # (the DataLoader's workers are forked: they inherit it)
        options = {"endpoint_url": endpoint, "aws_access_key_id": "x", "aws_secret_access_key": "x",
                   "region_name": "us-east-1"}  # fmt: skip
        ds = StreamingDataset(input_dir=url, cache_dir=cache, shuffle=True, seed=0, storage_options=options)
        loader = StreamingDataLoader(ds, batch_size=BATCH, num_workers=WORKERS, collate_fn=_ids)
    t0 = time.perf_counter()
    it = iter(loader)
    got = len(next(it))
    first = time.perf_counter() - t0
    got += sum(len(b) for b in itertools.islice(it, records // BATCH - 1))
    total = time.perf_counter() - t0
    del it
    return got / total, first


def main(argv: list[str]) -> None:
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "x")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "x")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    if argv[0] == "convert":
        print(json.dumps({"seconds": convert(argv[1], argv[2], argv[3])}))
    else:
        rate, first = epoch(argv[1], argv[2], argv[3], argv[4], int(argv[5]))
        print(json.dumps({"rate": rate, "first": first}))


if __name__ == "__main__":
    main(sys.argv[1:])
