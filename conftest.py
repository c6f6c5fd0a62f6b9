"""The doctests (``--doctest-modules`` collects them from ``src/``) make their example files with
``tempfile.mkdtemp()``: each runs with tempfile's directory — and sjsonl's private cache,
``$XDG_CACHE_HOME`` — set to one of its own, removed after it, so a test run leaves nothing in the temp dir
or in the user's cache. (``tests/conftest.py`` holds the fixtures of the test modules.)"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator

import pytest
from _pytest.doctest import DoctestItem


@pytest.fixture(autouse=True)
def _doctest_temp_dir(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    if not isinstance(request.node, DoctestItem):
        yield
        return
    own = tempfile.mkdtemp(prefix="sjsonl-doctest-")
    before = tempfile.tempdir
    tempfile.tempdir = own
    monkeypatch.setenv("XDG_CACHE_HOME", own)
    try:
        yield
    finally:
        tempfile.tempdir = before
        shutil.rmtree(own, ignore_errors=True)
