"""Progress reporting on stderr for long index builds (tqdm when installed and wanted)."""

from __future__ import annotations

import sys
from collections.abc import Callable

#: Files at least this large show a progress bar when stderr is a terminal.
PROGRESS_MIN_BYTES = 256 << 20


class Progress:
    """A byte counter that drives a tqdm bar when enabled; a no-op otherwise."""

    def __init__(self, total: int, desc: str, enabled: bool | None) -> None:
        if enabled is None:
            enabled = total >= PROGRESS_MIN_BYTES and sys.stderr.isatty()
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
