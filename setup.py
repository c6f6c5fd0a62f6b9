"""Builds sjsonl's one C extension, the newline scan (everything else is in pyproject.toml).

It is optional: without a C compiler the install still succeeds and sjsonl uses its numpy scan, which
gives the same offsets (``sjsonl.index.scan.NATIVE`` says which one runs).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "sjsonl.index._newlines",
            ["src/sjsonl/index/_newlines.c"],
            optional=True,
            extra_compile_args=["-O3"],
        )
    ]
)
