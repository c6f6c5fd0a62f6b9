"""Builds sjsonl's two C extensions (everything else is in pyproject.toml): the newline scan, and random
access into compact indexes.

Both are optional: without a C compiler the install still succeeds and sjsonl uses numpy instead, which
gives the same offsets (``sjsonl.index.scan.NATIVE`` and ``sjsonl.index.packed.NATIVE`` say which runs).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "sjsonl.index._newlines",
            ["src/sjsonl/index/_newlines.c"],
            optional=True,
            extra_compile_args=["-O3"],
        ),
        Extension(
            "sjsonl.index._packed",
            ["src/sjsonl/index/_packed.c"],
            optional=True,
            extra_compile_args=["-O3"],
        ),
    ]
)
