# Two commands do all the set-up on a fresh clone:
#   make demo   — creates .venv with the core library and runs the demo on a generated sample
#   make test   — creates .venv with every extra (torch CPU, MindSpore, 🤗 datasets, s3 …) and runs all tests
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip install -q --disable-pip-version-check -c constraints-test.txt

.PHONY: demo test lint bench clean

$(VENV)/.core: pyproject.toml constraints-test.txt
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

test: $(VENV)/.all lint
	$(PY) -m pytest -q

bench: $(VENV)/.all
	$(PIP) -e '.[bench]'
	$(PY) benchmarks/run.py --out benchmarks/results.md
	$(PY) benchmarks/plot.py

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .ruff_cache .hypothesis
