"""sjsonl — random-access, shuffleable, resumable JSON Lines datasets for deep learning.

One fast pass records where each record starts (``data.index.npy``); then ``ds[i]`` is a slice of a
memory-mapped file and one JSON parse. No conversion step, no second copy of the data.

Example:
    >>> import os, tempfile
    >>> from sjsonl import JSONLIndexer, JSONLDataset
    >>> path = os.path.join(tempfile.mkdtemp(), "data.jsonl")
    >>> _ = open(path, "w").write('{"text": "hello"}\\n{"text": "world"}\\n')
    >>> indexer = JSONLIndexer(path)
    >>> indexer.populate_index()
    >>> indexer.write_index_to_disk().endswith("data.index.npy")
    True
    >>> ds = JSONLDataset(path)
    >>> len(ds), ds[1]
    (2, {'text': 'world'})

Folders are layers, each importing only those before it: :mod:`sjsonl.runtime` → :mod:`sjsonl.storage` →
:mod:`sjsonl.index` → :mod:`sjsonl.records` → :mod:`sjsonl.sampling` → :mod:`sjsonl.data` → adapters
(:mod:`sjsonl.hf`, :mod:`sjsonl.torch`, :mod:`sjsonl.mindspore`) → :mod:`sjsonl.cli`. Everything below is
importable from here; ``__all__`` is the public API, and the documentation's API reference renders it.
"""

import sjsonl.runtime.forks  # noqa: F401  (a forked child freezes what it inherits: see the module)
from sjsonl._version import __version__
from sjsonl.data.corpus import build_indexes
from sjsonl.data.dataset import JSONLDataset
from sjsonl.data.indexer import JSONLIndexer
from sjsonl.data.mixture import MixtureDataset, concatenate_datasets, interleave_datasets
from sjsonl.data.packing import PackedDataset
from sjsonl.data.prefetch import Prefetcher
from sjsonl.data.streaming import JSONLStream
from sjsonl.data.views import BatchedDataset
from sjsonl.errors import (
    ArtifactWarning,
    BadLineWarning,
    ColumnNotFoundError,
    DataFileError,
    DataFileIsADirectoryError,
    DataFileNotFoundError,
    DataFilePermissionError,
    DocumentError,
    FeaturesMismatchError,
    IndexBuildError,
    IndexFileError,
    IndexNotSavedWarning,
    IndexPlaceWarning,
    InvalidArgumentError,
    MissingDependencyError,
    RecordDecodeError,
    RecordFieldError,
    RecordIndexError,
    SchemaMismatchError,
    SJSONLError,
    SplitError,
    StaleDataError,
    StaleIndexError,
    UncheckedStateWarning,
    UntrustedIndexPlaceWarning,
)
from sjsonl.hf.load import load_dataset

__all__ = [
    "ArtifactWarning",
    "BadLineWarning",
    "BatchedDataset",
    "ColumnNotFoundError",
    "DataFileError",
    "DataFileIsADirectoryError",
    "DataFileNotFoundError",
    "DataFilePermissionError",
    "DocumentError",
    "FeaturesMismatchError",
    "IndexBuildError",
    "IndexFileError",
    "IndexNotSavedWarning",
    "IndexPlaceWarning",
    "InvalidArgumentError",
    "JSONLDataset",
    "JSONLIndexer",
    "JSONLStream",
    "MissingDependencyError",
    "MixtureDataset",
    "PackedDataset",
    "Prefetcher",
    "RecordDecodeError",
    "RecordFieldError",
    "RecordIndexError",
    "SJSONLError",
    "SchemaMismatchError",
    "SplitError",
    "StaleDataError",
    "StaleIndexError",
    "UncheckedStateWarning",
    "UntrustedIndexPlaceWarning",
    "__version__",
    "build_indexes",
    "concatenate_datasets",
    "interleave_datasets",
    "load_dataset",
]
