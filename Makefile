# Dev tasks. `make demo` and `make test` are all a fresh machine needs (see README.md).

PYTHON311 ?= python3.11
VENV      := .venv
PY        := $(VENV)/bin/python
STAMP     := $(VENV)/.installed-dev
# Static checks live in their own venv: fake-bpy-module there would shadow the real bpy in $(VENV).
CHECK_VENV  := .venv-check
CHECK_PY    := $(CHECK_VENV)/bin/python
CHECK_STAMP := $(CHECK_VENV)/.installed-check

.PHONY: venv test test-compat test-farm check demo bench bench-quick extension

venv: $(STAMP)

define need_python311
	@command -v $(PYTHON311) >/dev/null 2>&1 || { \
	  echo "error: $(PYTHON311) not found; bpy 5.0.1 needs Python 3.11 exactly (install it or run 'make PYTHON311=/path/to/python3.11')" >&2; \
	  exit 1; }
endef

# Re-run the install whenever pyproject.toml (the pins) changes. The project itself goes in
# editable mode, so `import ik_solvers` works from any folder and follows the working tree.
$(STAMP): pyproject.toml
	$(need_python311)
	@test -x $(PY) || $(PYTHON311) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade "pip>=25.1"
	$(PY) -m pip install --group dev
	$(PY) -m pip install --no-deps -e .
	@touch $(STAMP)

$(CHECK_STAMP): pyproject.toml
	$(need_python311)
	@test -x $(CHECK_PY) || $(PYTHON311) -m venv $(CHECK_VENV)
	$(CHECK_PY) -m pip install --quiet --upgrade "pip>=25.1"
	$(CHECK_PY) -m pip install --group check
	@touch $(CHECK_STAMP)

test: venv
	$(PY) -m pytest tests

# The whole suite on bpy 4.4.x, 4.5.x and the newest on PyPI (pins: pyproject.toml groups bpy44, bpy45, bpy53), each in
# its own venv with the project installed editable. `timeout` turns a hang at exit into a failure.
# `make test-compat COMPAT_GROUPS="bpy51 bpy52"` runs the series in between.
COMPAT_GROUPS ?= bpy44 bpy45 bpy53
COMPAT_VENVS  := .venv-compat
# Blender 5.1 and newer are built for Python 3.13: the groups named here get a Python 3.13 venv.
PY313_GROUPS  := bpy51 bpy52 bpy53
# python3.13 on the PATH, else pyenv's (whose shim for a version that is not selected fails when run).
PYTHON313 ?= $(firstword $(foreach candidate,python3.13 $(wildcard $(shell pyenv root 2>/dev/null)/versions/3.13*/bin/python3.13),\
  $(shell $(candidate) -c 'import sys; assert sys.version_info[:2] == (3, 13)' >/dev/null 2>&1 && echo $(candidate))))

test-compat: $(COMPAT_GROUPS:%=$(COMPAT_VENVS)/%/.installed)
	@status=0; for group in $(COMPAT_GROUPS); do \
	  echo "== the test suite on $$group"; \
	  timeout 1200 $(COMPAT_VENVS)/$$group/bin/python -m pytest tests -q || status=1; \
	done; exit $$status

$(COMPAT_VENVS)/%/.installed: pyproject.toml
	$(eval compat_python := $(if $(filter $*,$(PY313_GROUPS)),$(PYTHON313),$(PYTHON311)))
	@test -n "$(compat_python)" && command -v $(compat_python) >/dev/null 2>&1 || { \
	  echo "error: no Python for $* (Blender 4.4-5.0 need python3.11, 5.1 and newer python3.13; set PYTHON311 / PYTHON313)" >&2; exit 1; }
	@test -x $(@D)/bin/python || $(compat_python) -m venv $(@D)
	$(@D)/bin/python -m pip install --quiet --upgrade "pip>=25.1"
	$(@D)/bin/python -m pip install --quiet --group $*
	$(@D)/bin/python -m pip install --quiet --no-deps -e .
	@touch $@

# Only the farm test (also part of `make test`): the job bundle farm/ik_bake run by openjd.
test-farm: venv
	$(PY) -m pytest tests/farm

# ruff (lint) and mypy (types, against fake-bpy-module) over the add-on and the scripts.
# Both run even when the first fails, so one run lists every problem.
check: $(CHECK_STAMP)
	@status=0; \
	$(CHECK_PY) -m ruff check ik_solvers scripts || status=1; \
	$(CHECK_PY) -m mypy ik_solvers scripts || status=1; \
	exit $$status

demo: venv
	$(PY) scripts/demo.py --out out

# The core benchmark (scripts/bench_core.py; README "Experiments and benchmarks"), measured on the
# 2-core development machine. `bench`: 10,000 targets per chain, the best of 3 batched runs, 100 targets
# timed one by one: 11 minutes when the machine is quiet, 27 minutes (19 of CPU) with its cores shared.
# `bench-quick`: the same rows and columns from 1,000 targets, 1 run, 20 one by one: about 2 minutes
# (81 s of CPU); noisier numbers, for a look, not for quoting.
bench: venv
	@echo "bench: about 11 min on a quiet 2-core machine (27 min with the cores shared); make bench-quick: about 2 min"
	$(PY) scripts/bench_core.py

bench-quick: venv
	$(PY) scripts/bench_core.py --out out/bench-quick --targets 1000 --loop-sample 20 --repeats 1

extension: venv
	$(PY) scripts/build_extension.py --out dist
