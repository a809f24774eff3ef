# The two set-up commands: `make demo` runs the main job, `make test` runs the whole suite.
# Both create .venv and install everything on first use (CPU torch first, so nothing pulls CUDA).
# `make lint` runs the gates CI runs before the tests: ruff check, ruff format --check, mypy.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
LINT_PATHS := zeus_core zeus_integrations benchmarks examples tests

.PHONY: demo test lint install clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install torch==2.13.0
	DS_BUILD_OPS=0 $(PY) -m pip install -e '.[all,dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(PY) examples/lightning_quickstart.py

lint: $(STAMP)
	$(PY) -m ruff check $(LINT_PATHS)
	$(PY) -m ruff format --check $(LINT_PATHS)
	$(PY) -m mypy zeus_core zeus_integrations

test: $(STAMP)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(PY) -m pytest tests

clean:
	rm -rf $(VENV) out .mypy_cache .ruff_cache
