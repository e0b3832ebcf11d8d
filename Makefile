# Two commands matter: `make run` and `make test`. Both create the venv on first use.
PYTHON     ?= python3
VENV       ?= .venv
# Pinned on purpose: a bare or open-ended `torch` pulls a multi-GB CUDA build.
# Override for another build, e.g. `make test TORCH_SPEC="torch==2.9.1"`.
TORCH_SPEC ?= torch==2.13.0
PY          = $(VENV)/bin/python
STAMP       = $(VENV)/.installed

.PHONY: run test install clean bench imports

$(STAMP): pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet -e ".[test]" "$(TORCH_SPEC)"
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(VENV)/bin/cpudoctor

test: $(STAMP)
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest $(PYTEST_ARGS)

# The layer contracts alone (pyproject.toml [tool.importlinter]); `make test` runs them too.
imports: $(STAMP)
	$(PY) tests/import_contracts.py

clean:
	rm -rf $(VENV) build *.egg-info test-output
