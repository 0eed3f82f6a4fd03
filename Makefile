# fedjoule: `make run` runs the default scenario, `make test` the test suite.
# Both create (or reuse) the virtual environment .venv and install fedjoule into it.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DATA_DIR ?= $(if $(FEDJOULE_DATA_DIR),$(FEDJOULE_DATA_DIR),$(abspath ../shared/datasets))

.PHONY: run test test-slow lint reference bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/fedjoule run default

test: $(STAMP)
	FEDJOULE_DATA_DIR=$(DATA_DIR) $(BIN)/python -m pytest -q

test-slow: $(STAMP)
	FEDJOULE_DATA_DIR=$(DATA_DIR) $(BIN)/python -m pytest -q -m slow

lint: $(STAMP)
	$(BIN)/ruff check fedjoule tests benchmarks

bench: $(STAMP)  # every benchmarks/*.py script, one after another
	for script in benchmarks/*.py; do PYTHONPATH=. FEDJOULE_DATA_DIR=$(DATA_DIR) $(BIN)/python $$script || exit 1; done

reference: $(STAMP)
	$(BIN)/fedjoule reference > docs/scenario-reference.md

clean:
	rm -rf $(VENV) runs .pytest_cache
