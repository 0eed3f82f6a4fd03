# fedjoule: `make run` runs the default scenario, `make test` the test suite.
# Both create (or reuse) the virtual environment .venv and install into it the
# exact releases of requirements/dev.lock (hash-checked), then fedjoule itself.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
LOCK := requirements/dev.lock
DATA_DIR ?= $(if $(FEDJOULE_DATA_DIR),$(FEDJOULE_DATA_DIR),$(abspath ../shared/datasets))
TOOLS := .venv-tools
LATEST := .venv-latest
# mkdocs-material's notice about its successor is not news on every build
MKDOCS := NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir build/site

.PHONY: run test test-slow test-latest lock docs lint reference bench clean

$(STAMP): pyproject.toml $(LOCK)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --require-hashes --no-deps -r $(LOCK)
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/fedjoule run default

# The documentation site builds first (mkdocs.yml; --strict: a broken link, a page left
# out of the nav or a broken API reference fails the suite), then the tests. Not
# --quiet: mkdocs 1.6 then stops counting warnings, and --strict passes anything.
test: $(STAMP)
	$(MKDOCS)
	FEDJOULE_DATA_DIR=$(DATA_DIR) $(BIN)/python -m pytest -q

test-slow: $(STAMP)
	FEDJOULE_DATA_DIR=$(DATA_DIR) $(BIN)/python -m pytest -q -m slow

# The suite on the newest releases pyproject allows, in a venv of its own: an
# upgrade is a tested step (then `make lock`), never an accident of a fresh machine.
test-latest:
	rm -rf $(LATEST)
	$(PYTHON) -m venv $(LATEST)
	$(LATEST)/bin/python -m pip install --quiet --upgrade pip
	$(LATEST)/bin/python -m pip install --quiet --upgrade -e '.[dev]'
	$(LATEST)/bin/python -m pip list --format=freeze | grep -iE '^(torch|torchvision|numpy|scipy|pyyaml|pydantic|simpy)=='
	FEDJOULE_DATA_DIR=$(DATA_DIR) $(LATEST)/bin/python -m pytest -q

# Refresh requirements/dev.lock from pyproject.toml with uv (pip-compile's
# format, every file's sha256), for Python 3.11+ on every platform.
lock:
	test -x $(TOOLS)/bin/uv || ($(PYTHON) -m venv $(TOOLS) && $(TOOLS)/bin/python -m pip install --quiet uv)
	$(TOOLS)/bin/uv pip compile pyproject.toml --extra dev --universal --python-version 3.11 \
	  --generate-hashes --upgrade -c requirements/constraints.in -o $(LOCK)

docs: $(STAMP)  # the documentation site into build/site; --strict fails on any broken link
	$(MKDOCS)

lint: $(STAMP)
	$(BIN)/ruff check fedjoule tests benchmarks

bench: $(STAMP)  # every benchmarks/*.py script, one after another
	for script in benchmarks/*.py; do PYTHONPATH=. FEDJOULE_DATA_DIR=$(DATA_DIR) $(BIN)/python $$script || exit 1; done

reference: $(STAMP)
	$(BIN)/fedjoule reference > docs/scenario-reference.md

clean:
	rm -rf $(VENV) $(LATEST) $(TOOLS) runs build .pytest_cache
