# Two commands do all the set-up on a fresh clone:
#   make demo   — creates .venv with the core library and runs the demo on a generated sample
#   make test   — creates .venv with every extra (torch CPU, MindSpore, 🤗 datasets, s3 …) and runs all tests
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip install -q --disable-pip-version-check -c constraints-test.txt

.PHONY: demo test lint bench clean

# setup.py builds the compiled newline scan, compact-index decoder and guarded map (optional: without a C
# compiler their numpy twins and pread are used)
$(VENV)/.core: pyproject.toml setup.py src/sjsonl/index/_newlines.c src/sjsonl/index/_packed.c src/sjsonl/storage/_guarded.c constraints-test.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) --upgrade pip
	$(PIP) -e '.[progress]'
	touch $@

$(VENV)/.all: $(VENV)/.core
	$(PIP) -e '.[all,test]'
	touch $@

demo: $(VENV)/.core
	$(VENV)/bin/sjsonl demo

lint: $(VENV)/.all
	$(VENV)/bin/ruff check src tests benchmarks examples
	$(VENV)/bin/ruff format --check src tests benchmarks examples
	$(VENV)/bin/mypy

# The whole suite with the compiled scan, then every scan and index test again with the numpy fallback
# (tests/test_compact_index.py runs each test with both decoders already, in the first pass).
SCAN_TESTS := tests/test_scan.py tests/test_scan_stream.py tests/test_index_files.py \
	tests/test_index_integrity.py tests/test_real_files.py tests/test_storage_blocks.py tests/test_bad_lines.py \
	tests/test_append.py

test: $(VENV)/.all lint
	$(PY) -m pytest -q
	SJSONL_SCAN=numpy $(PY) -m pytest -q $(SCAN_TESTS)

bench: $(VENV)/.all
	$(PIP) -e '.[bench]'
	$(PY) benchmarks/run.py --out benchmarks/results.md
	$(PY) benchmarks/plot.py

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .ruff_cache .hypothesis src/sjsonl/index/*.so src/sjsonl/storage/*.so

# The mutation run (tests/mutations/): one-line bugs put into a copy of the checkout one at a time, each
# against the tests that must catch it; prints mutant | caught by | result, fails if any is missed.
.PHONY: mutants
mutants: $(VENV)/.all
	$(PY) tests/mutations/run.py
