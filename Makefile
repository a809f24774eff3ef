# The two set-up commands: `make demo` runs the main job, `make test` runs the whole suite.
# Both create .venv and install everything on first use (CPU torch first, so nothing pulls CUDA).
# `make lint` runs the gates CI runs before the tests: ruff check, ruff format --check, mypy.
# `make docs` builds the documentation site into site/ (mkdocs build --strict: a broken link fails).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
LINT_PATHS := zeus_core zeus_integrations benchmarks examples tests docs/_hooks .ci

.PHONY: demo test lint docs install clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install torch==2.13.0
	DS_BUILD_OPS=0 $(PY) -m pip install -e '.[all,dev,docs]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(PY) examples/lightning_quickstart.py

lint: $(STAMP)
	$(PY) -m ruff check $(LINT_PATHS)
	$(PY) -m ruff format --check $(LINT_PATHS)
	$(PY) -m mypy zeus_core zeus_integrations

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

test: $(STAMP)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(PY) -m pytest tests

clean:
	rm -rf $(VENV) out site .mypy_cache .ruff_cache
