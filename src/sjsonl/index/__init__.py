"""Index layer: where every record starts. It never parses JSON.

- :mod:`.scan` — the vectorised, threaded newline scan;
- :mod:`.store` — index files on disk: paths, atomic writes, metadata, staleness;
- :mod:`.build` — build / find / validate the index of one file.
"""

from sjsonl.index.build import build_offsets, find_index, line_number_at, load_or_build_index
from sjsonl.index.layout import IndexMeta, LoadedIndex, default_index_path
from sjsonl.index.scan import offset_dtype, scan_record_starts
from sjsonl.index.store import DataStamp, write_index

__all__ = [
    "DataStamp",
    "IndexMeta",
    "LoadedIndex",
    "build_offsets",
    "default_index_path",
    "find_index",
    "line_number_at",
    "load_or_build_index",
    "offset_dtype",
    "scan_record_starts",
    "write_index",
]
