# The two commands of the README:
#   make run    -- the main job (sets up everything it needs, then runs)
#   make test   -- the test suite (sets up everything it needs, then runs)
# Both need only GNU make and python3 (>= 3.11, with its venv module; on
# Debian: apt-get install make python3-venv -- .ci/run does that when needed).
# Both are idempotent: their venvs (.venv for the tests, .venv-run with only
# the spark extra for the main job) are (re)built only when pyproject.toml or
# this Makefile changes, or when one is missing or broken.
#
# `make test` runs every stage even when an earlier one fails, prints each
# stage's time, and exits non-zero if any stage failed:
#   pytest -> ruff -> mypy -> codegen --check -> docs -> scripts/wheel_check.py
# With CI=true, HYPOTHESIS_PROFILE defaults to "ci" (tests/conftest.py reads it).
# Pass extra pytest options with PYTEST_ARGS='-k foo -x'.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# Extras installed into the dev/CI venv (pyproject [project.optional-dependencies]).
EXTRAS ?= test,bench,dev,docs,spark,trio
# The main job's own venv: only what `make run` needs (the spark extra:
# pyspark, pyarrow), apart from the test venv with every extra.
RUN_VENV   ?= .venv-run
RUN_PY     := $(RUN_VENV)/bin/python
RUN_STAMP  := $(RUN_VENV)/.installed
RUN_EXTRAS ?= spark
# Extras scripts/wheel_check.py installs in a second phase to import their adapters.
WHEEL_EXTRAS ?= trio,broker

ifeq ($(CI),true)
export HYPOTHESIS_PROFILE ?= ci
endif

# mypy sees each adapter under its import name through a symlink farm
# (adapters/trio is the package amqp_sansio_trio, not "trio").
ADAPTERS := $(notdir $(patsubst %/__init__.py,%,$(wildcard adapters/*/__init__.py)))
MYPY_CMD = ( mkdir -p .mypy-src && for a in $(ADAPTERS); do ln -sfn ../adapters/$$a .mypy-src/amqp_sansio_$$a; done && \
	$(PY) -m mypy -p amqp_sansio $(foreach a,$(ADAPTERS),-p amqp_sansio_$(a)) && $(PY) -m mypy examples )

.PHONY: run run-venv test venv lint typecheck codegen-check wheel-check docs regen bench fuzz clean

# $(call make_venv,VENV,EXTRAS): (re)create VENV if it is missing or broken,
# then install the project (editable) with EXTRAS.
define make_venv
	@$(1)/bin/python -m pip --version >/dev/null 2>&1 || { \
	  echo "creating $(1) with $(PYTHON)"; rm -rf $(1); \
	  $(PYTHON) -m venv $(1) || { \
	    echo "error: '$(PYTHON) -m venv' failed; on Debian/Ubuntu: apt-get install python3-venv" >&2; exit 1; }; }
	$(1)/bin/python -m pip install -q --upgrade pip
	$(1)/bin/python -m pip install -q -e '.[$(2)]'
	@touch $(1)/.installed
endef

$(STAMP): pyproject.toml Makefile
	$(call make_venv,$(VENV),$(EXTRAS))

$(RUN_STAMP): pyproject.toml Makefile
	$(call make_venv,$(RUN_VENV),$(RUN_EXTRAS))

venv: $(STAMP)

run-venv: $(RUN_STAMP)

# The main job: a local Spark pipeline through the embedded broker (see
# README, "Main job"), in its own small venv ($(RUN_VENV)).  ARGS passes
# options: make run ARGS='--rows 100000'.
run: $(RUN_STAMP)
	@bash scripts/system-deps.sh run
	$(RUN_PY) -m amqp_sansio_spark.pipeline $(ARGS)

# $(call stage,NAME,COMMAND): announce, time, and run COMMAND; on failure
# remember NAME in $$failed and carry on.
define stage
echo "==> [$(1)]"; t0=$$(date +%s); \
if $(2); then r=ok; else r="FAILED (exit $$?)"; failed="$$failed $(1)"; fi; \
echo "<== [$(1)] $$r in $$(( $$(date +%s) - t0 ))s"; echo "[$(1)] $$r $$(( $$(date +%s) - t0 ))s" >> "$$summary";
endef

# pytest's exit 5 means it collected no test at all: fail loudly, never silently.
PYTEST_CMD = ( $(PY) -m pytest -q $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "error: pytest collected NO tests (exit 5) -- treated as a failure" >&2; fi; \
	exit $$rc )

test: $(STAMP)
	@bash scripts/system-deps.sh test
	@bash scripts/node-deps.sh
	@failed=; summary=$$(mktemp); \
	$(call stage,pytest,$(PYTEST_CMD)) \
	$(call stage,ruff,$(PY) -m ruff check .) \
	$(call stage,mypy,$(MYPY_CMD)) \
	$(call stage,codegen,$(PY) codegen/gen_0_10.py --check && $(PY) codegen/gen_0_9_1.py --check && $(PY) codegen/gen_0_9.py --check && $(PY) codegen/gen_1_0.py --check) \
	$(call stage,docs,$(DOCS_CMD)) \
	$(call stage,wheel,$(PY) scripts/wheel_check.py --extras '$(WHEEL_EXTRAS)') \
	echo "---- make test: stage summary"; cat "$$summary"; rm -f "$$summary"; \
	if [ -n "$$failed" ]; then echo "make test: FAILED stages:$$failed" >&2; exit 1; fi; \
	echo "make test: all stages passed"

# The API reference (docs/, Sphinx autodoc) -> build/docs/index.html.  Strict:
# a warning, or a reference to an amqp-sansio name that does not exist, fails.
DOCS_CMD = $(PY) -m sphinx -b html -E -W -n --keep-going -q docs build/docs

docs: $(STAMP)
	$(DOCS_CMD)
	@echo "API reference: build/docs/index.html"

lint: $(STAMP)
	$(PY) -m ruff check .

typecheck: $(STAMP)
	$(MYPY_CMD)

codegen-check: $(STAMP)
	$(PY) codegen/gen_0_10.py --check
	$(PY) codegen/gen_0_9_1.py --check
	$(PY) codegen/gen_0_9.py --check
	$(PY) codegen/gen_1_0.py --check

wheel-check: $(STAMP)
	$(PY) scripts/wheel_check.py --extras '$(WHEEL_EXTRAS)'

regen: $(STAMP)
	$(PY) codegen/gen_0_10.py
	$(PY) codegen/gen_0_9_1.py
	$(PY) codegen/gen_0_9.py
	$(PY) codegen/gen_1_0.py

bench: $(STAMP)
	$(PY) bench/codec_0_10.py
	$(PY) bench/codec_0_9_1.py
	$(PY) bench/codec_1_0.py

fuzz: $(STAMP)
	$(PY) fuzz/run.py

clean:
	rm -rf $(VENV) $(RUN_VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis
