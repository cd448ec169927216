PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install test lint format bench clean

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps -e .
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(PY) -m ruff check src tests benchmarks data_prep
	$(PY) -m pytest -q

lint: $(STAMP)
	$(PY) -m ruff check src tests benchmarks data_prep
	$(PY) -m ruff format --check src tests benchmarks data_prep

format: $(STAMP)
	$(PY) -m ruff format src tests benchmarks data_prep
	$(PY) -m ruff check --fix src tests benchmarks data_prep

bench: $(STAMP)
	$(PY) benchmarks/bench_inference.py

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
