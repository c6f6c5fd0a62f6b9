"""Progress reporting on stderr for long index builds (tqdm when installed and wanted)."""

from __future__ import annotations

import sys
from collections.abc import Callable

#: Files at least this large show a progress bar when stderr is a terminal.
PROGRESS_MIN_BYTES = 256 << 20


class Progress:
    """A byte counter that drives a tqdm bar when enabled; a no-op otherwise."""

    def __init__(self, total: int | None, desc: str, enabled: bool | None, *, size_hint: int = 0) -> None:
        # total None: not known in advance (a compressed file); the bar then counts bytes without a
        # percentage, and size_hint (the stored size) decides whether the file is large enough for one
        if enabled is None:
            big = (total if total is not None else size_hint) >= PROGRESS_MIN_BYTES
            enabled = big and sys.stderr.isatty()
        self._bar = None
        if enabled:
            try:
                from tqdm import tqdm
            except ImportError:
                return
            self._bar = tqdm(total=total, desc=desc, unit="B", unit_scale=True, file=sys.stderr, leave=False)

    @property
    def update(self) -> Callable[[int], None] | None:
        return self._bar.update if self._bar is not None else None

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
