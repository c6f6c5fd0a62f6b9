# Two commands do all the set-up on a fresh clone:
#   make demo   — creates .venv with the core library and runs the demo on a generated sample
#   make test   — creates .venv with every extra (torch CPU, MindSpore, 🤗 datasets, s3 …) and runs the tests
#                 (all but the slow tier; `make test-slow` runs that, and CI runs both)
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip install -q --disable-pip-version-check -c constraints-test.txt

.PHONY: demo test test-slow lint bench clean docs docs-serve

# setup.py builds the compiled newline scan, compact-index decoder and guarded map (optional: without a C
# compiler their numpy twins and pread are used)
BUILT_FROM := pyproject.toml setup.py src/sjsonl/index/_newlines.c src/sjsonl/index/_packed.c src/sjsonl/storage/_guarded.c src/sjsonl/records/_utf8.c src/sjsonl/records/_types.c src/sjsonl/records/_string_avx2.h src/sjsonl/records/_string_avx512.h src/sjsonl/storage/_guarded_api.h src/sjsonl/data/_hot.c src/sjsonl/data/packing/_plan.c constraints-test.txt

$(VENV)/.core: $(BUILT_FROM)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) --upgrade pip
	$(PIP) -e '.[progress]'
	touch $@

# Not on top of .core: one install, one build of the extensions (a fresh clone's `make test` counts both)
$(VENV)/.all: $(BUILT_FROM)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) --upgrade pip
	$(PIP) -e '.[progress,all,test]'
	touch $(VENV)/.core $@

# Ray (sjsonl.ray, its tests and the Ray Train example) only for the slow tier: not in `all`, whose install
# time the fast tier's budget counts
$(VENV)/.ray: $(VENV)/.all
	$(PIP) -e '.[ray]'
	touch $@

demo: $(VENV)/.core
	$(VENV)/bin/sjsonl demo

lint: $(VENV)/.all
	$(VENV)/bin/ruff check src tests benchmarks examples
	$(VENV)/bin/ruff format --check src tests benchmarks examples
	$(VENV)/bin/mypy

# The README's test command: lint, then every test outside the slow tier, on every core.
test: $(VENV)/.all lint
	$(PY) -m pytest -q -m "not slow and not alone" -n auto --dist loadfile

# The slow tier — chaos, big and many files, real trainers, plain user scripts and notebooks, packaging, the
# full 🤗 differential — then every scan and index test again with the numpy fallback (the compact-index
# tests run both decoders in the first pass already). CI runs it after `make test`.
SCAN_TESTS := tests/test_scan.py tests/test_scan_stream.py tests/test_index_files.py \
	tests/test_index_integrity.py tests/test_real_files.py tests/test_storage_blocks.py tests/test_bad_lines.py \
	tests/test_append.py
test-slow: $(VENV)/.all $(VENV)/.ray
	HYPOTHESIS_PROFILE=ci $(PY) -m pytest -q -m "slow and not alone" -n auto --dist loadfile
	HYPOTHESIS_PROFILE=ci $(PY) -m pytest -q -m alone
	SJSONL_SCAN=numpy HYPOTHESIS_PROFILE=ci $(PY) -m pytest -q -n auto --dist loadfile $(SCAN_TESTS)

# Every suite: benchmarks/results/<suite>.json, then benchmarks/results/RESULTS.md and the README's figures
# block generated from them (`benchmarks/run.py --only core,scan` re-runs some suites; `--quick` smoke-tests).
bench: $(VENV)/.all $(VENV)/.ray .venv-baselines/.done  # (the clusters suite runs Ray)
	$(PIP) -e '.[bench]'  # torchtune, the packing suite's baseline
	$(PY) benchmarks/run.py

# MosaicML streaming and LitData for the remote suite, in an environment of their own: Mosaic pins numpy<2.2
.venv-baselines/.done:
	test -x .venv-baselines/bin/python || $(PYTHON) -m venv .venv-baselines
	.venv-baselines/bin/python -m pip install -q --disable-pip-version-check 'torch==2.13.0' \
		'mosaicml-streaming==0.13.0' 'litdata==0.2.76'
	touch $@

# The documentation site (mkdocs-material + mkdocstrings): guides in docs/, the API reference from the
# docstrings, the benchmark tables from benchmarks/results/. --strict: any warning fails the build
# (tests/test_docs_site.py builds it the same way, so CI does too).
docs: $(VENV)/.all
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

docs-serve: $(VENV)/.all
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve

clean:
	rm -rf $(VENV) build dist site src/*.egg-info .pytest_cache .ruff_cache .hypothesis src/sjsonl/index/*.so src/sjsonl/storage/*.so src/sjsonl/records/*.so src/sjsonl/data/*.so src/sjsonl/data/packing/*.so

# The mutation run (tests/mutations/): one-line bugs put into a copy of the checkout one at a time, each
# against the tests that must catch it; prints mutant | caught by | result, fails if any is missed.
.PHONY: mutants
mutants: $(VENV)/.all
	$(PY) tests/mutations/run.py
