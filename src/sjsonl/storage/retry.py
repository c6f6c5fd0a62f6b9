"""Retries for remote reads: transient faults (HTTP 5xx and S3's ``SlowDown``, connection resets, timeouts)
are retried with jittered exponential backoff; anything else (403, 404, a failed ``If-Match``) fails at once.

Object stores fail a small share of requests by design (S3 answers ``503 SlowDown`` to bursts and asks
clients to back off and retry), and a training run of days meets every kind of network fault. The backends
(botocore, s3fs) retry some of these themselves; what still reaches sjsonl is retried here, ``attempts``
times in all, sleeping ``uniform(0, min(cap, base · 2^k))`` before attempt ``k + 1`` ("full jitter", AWS's
advice: retries of many clients do not line up). Only the failed ranges of a batch are asked again.

Example:
    >>> is_transient(OSError(16, "Please reduce your request rate.")), is_transient(PermissionError("403"))
    (True, False)
    >>> calls = []
    >>> def flaky():
    ...     calls.append(1)
    ...     if len(calls) < 3:
    ...         raise ConnectionResetError("reset by peer")
    ...     return "ok"
    >>> with_retries(flaky, RetryPolicy(base=0.001)), len(calls)
    ('ok', 3)
"""

from __future__ import annotations

import errno
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")

#: errno values of transient failures: s3fs maps 500 → EREMOTEIO, 503/SlowDown → EBUSY.
_TRANSIENT_ERRNOS = {
    errno.EBUSY, errno.EREMOTEIO, errno.ETIMEDOUT, errno.ECONNRESET, errno.ECONNABORTED, errno.ECONNREFUSED,
    errno.EPIPE, errno.EAGAIN,
}  # fmt: skip
_THROTTLING_WORDS = ("slowdown", "slow down", "reduce your request rate")
_TRANSIENT_WORDS = (
    *_THROTTLING_WORDS, "service unavailable", "internal error", "timeout", "timed out", "connection reset",
    "server disconnected", "payload",
)  # fmt: skip


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently to retry (``SJSONL_REMOTE_ATTEMPTS`` overrides ``attempts``)."""

    attempts: int = 8
    base: float = 0.1  # seconds
    cap: float = 5.0

    @classmethod
    def from_env(cls) -> RetryPolicy:
        raw = os.environ.get("SJSONL_REMOTE_ATTEMPTS", "")
        return cls(attempts=max(1, int(raw))) if raw.strip().isdigit() else cls()

    def delay(self, attempt: int) -> float:
        """Seconds to sleep after failed attempt ``attempt`` (0-based)."""
        return random.uniform(0.0, min(self.cap, self.base * 2**attempt))


def is_transient(exc: BaseException) -> bool:
    """Whether a failed request is worth asking again (a fault of the network or the server's load)."""
    if isinstance(exc, (PermissionError, FileNotFoundError, IsADirectoryError)):
        return False
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return True
    if isinstance(exc, OSError) and exc.errno in _TRANSIENT_ERRNOS:
        return True
    if isinstance(exc, OSError) and exc.errno == errno.EINVAL:  # s3fs's 412 PreconditionFailed: not transient
        return False
    name = type(exc).__name__  # botocore's own (EndpointConnectionError, ReadTimeoutError, …) are no OSError
    if any(word in name for word in ("Connection", "Timeout")):
        return True
    text = f"{name} {exc}".lower()
    return any(word in text for word in _TRANSIENT_WORDS)


def is_throttling(exc: BaseException) -> bool:
    """Whether a failure is the server asking for fewer requests (S3 ``503 SlowDown``; s3fs: ``EBUSY``) —
    transient, and a reason to send fewer at once (:mod:`~sjsonl.storage.fetch`).

    Example:
        >>> is_throttling(OSError(16, "Please reduce your request rate.")), is_throttling(FileNotFoundError())
        (True, False)
    """
    if isinstance(exc, OSError) and exc.errno == errno.EBUSY:
        return True
    text = f"{type(exc).__name__} {exc}".lower()
    return "503" in text or any(word in text for word in _THROTTLING_WORDS)


def with_retries(call: Callable[[], T], policy: RetryPolicy | None = None) -> T:
    """``call()``, retried on transient failures; the last failure is raised when every attempt failed."""
    policy = policy or RetryPolicy.from_env()
    for attempt in range(policy.attempts):
        try:
            return call()
        except Exception as exc:
            if attempt + 1 >= policy.attempts or not is_transient(exc):
                raise
            time.sleep(policy.delay(attempt))
    raise AssertionError("unreachable")  # pragma: no cover
