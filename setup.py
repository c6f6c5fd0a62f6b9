"""Builds sjsonl's seven C extensions (everything else is in pyproject.toml): the newline scan, random
access into compact indexes, memory-mapped reads that raise instead of SIGBUS, UTF-8 validation without
decoding, column types from the record bytes, ``ds[i]`` in one compiled step, and the bin packing of sequence
packs.

All are optional: without a C compiler the install still succeeds and sjsonl uses numpy instead, which
gives the same offsets (``sjsonl.index.scan.NATIVE`` and ``sjsonl.index.packed.NATIVE`` say which runs),
reads local files with ``pread`` instead of a guarded map (``sjsonl.storage.local.GUARDED``), and checks
UTF-8 with ``bytes.decode`` (``sjsonl.records.decode.NATIVE_UTF8``), types columns in Python
(``sjsonl.records.fast_types.NATIVE``), and serves ``ds[i]`` in Python
(``sjsonl.data.dataset.HOT``) and packs in Python (``sjsonl.data.packing.plan.NATIVE``).
"""

import sys

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "sjsonl.index._newlines",
            ["src/sjsonl/index/_newlines.c"],
            depends=["src/sjsonl/storage/_guarded_api.h"],
            libraries=["dl"] if sys.platform.startswith("linux") else [],  # dlsym (in glibc itself from 2.34)
            optional=True,
            extra_compile_args=["-O3"],
        ),
        Extension(
            "sjsonl.storage._guarded",
            ["src/sjsonl/storage/_guarded.c"],
            depends=["src/sjsonl/storage/_guarded_api.h"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
        Extension(
            "sjsonl.data._hot",
            ["src/sjsonl/data/_hot.c"],
            depends=["src/sjsonl/storage/_guarded_api.h"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
        Extension(
            "sjsonl.records._utf8",
            ["src/sjsonl/records/_utf8.c"],
            optional=True,
            extra_compile_args=["-O3"],
        ),
        Extension(
            "sjsonl.records._types",
            ["src/sjsonl/records/_types.c"],
            depends=[
                "src/sjsonl/records/_string_avx2.h",
                "src/sjsonl/records/_string_avx512.h",
                "src/sjsonl/storage/_guarded_api.h",
            ],
            optional=True,
            extra_compile_args=["-O3"],
        ),
        Extension(
            "sjsonl.data.packing._plan",
            ["src/sjsonl/data/packing/_plan.c"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
        Extension(
            "sjsonl.index._packed",
            ["src/sjsonl/index/_packed.c"],
            optional=True,
            extra_compile_args=["-O3"],
        ),
    ]
)
