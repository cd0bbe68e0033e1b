# The two commands of the README:
#   make run    -- the main job (sets up everything it needs, then runs)
#   make test   -- the test suite (sets up everything it needs, then runs)
# Both are idempotent: the venv is rebuilt only when pyproject.toml changes.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: run test lint typecheck wheel-check regen bench fuzz clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,bench,dev]'
	@touch $(STAMP)

run: $(STAMP)
	$(PY) -m amqp_sansio_cli.main demo

test: $(STAMP)
	$(PY) -m pytest -q $(PYTEST_ARGS)
	$(PY) -m ruff check .
	$(PY) -m mypy
	$(PY) codegen/gen_0_10.py --check
	$(PY) tests/wheel_check.py

lint: $(STAMP)
	$(PY) -m ruff check .

typecheck: $(STAMP)
	$(PY) -m mypy

regen: $(STAMP)
	$(PY) codegen/gen_0_10.py

bench: $(STAMP)
	$(PY) bench/codec_0_10.py

fuzz: $(STAMP)
	$(PY) fuzz/run.py

clean:
	rm -rf $(VENV) build dist *.egg-info
