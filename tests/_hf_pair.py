"""The same small JSONL file loaded by 🤗 (Arrow) and by sjsonl, for side-by-side tests of the 🤗 surface."""

from __future__ import annotations

import json


def write_rows(path, n: int = 40):
    rows = [{"id": i, "text": f"t{i} " * (i % 5 + 1), "score": i / 4, "ids": [i, i + 1]} for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


def pair(tmp_path, n: int = 40):
    import datasets

    from sjsonl import JSONLDataset

    path = tmp_path / "rows.jsonl"
    rows = write_rows(path, n)
    hf = datasets.load_dataset("json", data_files=str(path), split="train", cache_dir=str(tmp_path / "hf"))
    return hf, JSONLDataset(path), rows
