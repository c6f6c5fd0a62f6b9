"""MindSpore adapters: JSON Lines (and 🤗 datasets) as ``mindspore.dataset.GeneratorDataset``.

- :func:`load_dataset` — MindNLP's ``load_dataset`` (🤗's parameters) over raw JSON Lines, no conversion;
- :func:`to_generator_dataset` — a ``GeneratorDataset`` from a JSONLDataset, JSONLStream or 🤗 dataset;
- :mod:`sjsonl.mindspore.columns` — how records become rows of numpy arrays (the conversion table).

Importing this package does not import MindSpore or 🤗 ``datasets``; the functions that need them import them
and, if missing, raise :class:`~sjsonl.errors.MissingDependencyError` naming the extra
(``pip install 'sjsonl[mindspore]'`` / ``'sjsonl[hf]'``).

Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "chat.jsonl")
    >>> _ = open(path, "w").write('{"id": 1, "messages": [{"role": "user", "content": "hi"}]}\\n')
    >>> gd = load_dataset(path, split="train")
    >>> next(gd.create_dict_iterator(output_numpy=True, num_epochs=1))["messages"]
    array('[{"role":"user","content":"hi"}]', dtype='<U32')
"""

from sjsonl.mindspore.adapters import IterSource, MapSource, make_schema, make_source, to_generator_dataset
from sjsonl.mindspore.columns import Column, Schema, SchemaMismatchError, infer_schema
from sjsonl.mindspore.loading import load_dataset

__all__ = [
    "Column",
    "IterSource",
    "MapSource",
    "Schema",
    "SchemaMismatchError",
    "infer_schema",
    "load_dataset",
    "make_schema",
    "make_source",
    "to_generator_dataset",
]
