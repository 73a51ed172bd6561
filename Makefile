# Dev tasks. `make demo` and `make test` are all a fresh machine needs (see README.md).

PYTHON311 ?= python3.11
VENV      := .venv
PY        := $(VENV)/bin/python
STAMP     := $(VENV)/.installed-dev

.PHONY: venv test demo bench extension

venv: $(STAMP)

# Re-run the install whenever pyproject.toml (the pins) changes.
$(STAMP): pyproject.toml
	@command -v $(PYTHON311) >/dev/null 2>&1 || { \
	  echo "error: $(PYTHON311) not found; bpy 5.0.1 needs Python 3.11 exactly (install it or run 'make PYTHON311=/path/to/python3.11')" >&2; \
	  exit 1; }
	@test -x $(PY) || $(PYTHON311) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade "pip>=25.1"
	$(PY) -m pip install --group dev
	@touch $(STAMP)

test: venv
	$(PY) -m pytest tests

demo: venv
	$(PY) scripts/demo.py --out out

bench: venv
	$(PY) scripts/bench_core.py

extension: venv
	$(PY) scripts/build_extension.py --out dist
