import numpy as np
import numpy.typing as npt

from sjsonl.storage._guarded import GuardedMap

Signature = tuple[str | None, int | None]

def scan(
    data: bytes | bytearray | memoryview | GuardedMap, bounds: npt.NDArray[np.int64], lo: int, hi: int, /
) -> tuple[int, dict[str, Signature | None], dict[str, int], int, Signature | None]: ...
def string_way(name: str, /) -> str: ...
