"""A deliberately slow storage for prefetch tests and benchmarks: local files behind fsspec with a fixed
delay on every read (``slowfile:///abs/path``, ``storage_options={"latency": seconds}``), like an object
store's round trip. Only reads are delayed; metadata calls are not."""

from __future__ import annotations

import threading
import time

import fsspec
from fsspec.implementations.local import LocalFileSystem

PROTOCOL = "slowfile"


class SlowFileSystem(LocalFileSystem):
    protocol = PROTOCOL
    cachable = True
    # Counted over every instance (the dataset's instance lives inside its storage): reads made, reads
    # in flight, and the most ever in flight at once.
    reads = active = peak = 0
    _lock = threading.Lock()

    def __init__(self, latency: float = 0.005, **kwargs) -> None:
        super().__init__(**kwargs)
        self.latency = float(latency)

    @classmethod
    def reset_counts(cls) -> None:
        with cls._lock:
            cls.reads = cls.active = cls.peak = 0

    @classmethod
    def _strip_protocol(cls, path):
        path = str(path)
        if path.startswith(PROTOCOL + "://"):
            path = path[len(PROTOCOL) + 3 :]
        return super()._strip_protocol(path)

    def cat_file(self, path, start=None, end=None, **kwargs):
        cls = type(self)
        with cls._lock:
            cls.reads += 1
            cls.active += 1
            cls.peak = max(cls.peak, cls.active)
        try:
            time.sleep(self.latency)  # releases the GIL, as a network wait does
            return super().cat_file(path, start=start, end=end, **kwargs)
        finally:
            with cls._lock:
                cls.active -= 1


def register() -> None:
    fsspec.register_implementation(PROTOCOL, SlowFileSystem, clobber=True)


def url(path) -> str:
    return f"{PROTOCOL}://{path}"
