from collections.abc import Callable, Iterator
from typing import Any

class HotRecords:
    def __init__(
        self,
        data: Any,
        offsets: memoryview,
        end: int,
        decode: Callable[[Any], Any],
        slow: Callable[[int, int], Any],
        check: Callable[[Any], object] | None = None,
        convert: Callable[[Any], Any] | None = None,
    ) -> None: ...
    def get(self, i: int, /) -> Any: ...
    def iter(self, lo: int, hi: int, check: Callable[[], object] | None, /) -> Iterator[Any]: ...
    def __len__(self) -> int: ...

class Lookup:
    def __getitem__(self, key: Any, /) -> Any: ...
