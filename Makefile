# Two commands matter: `make run` and `make test`. Both create the venv on first use.
# A third, for people who package the app: `make dist` (the standalone app, no torch inside;
# see packaging/build_dist.py) and `make dist-check` (builds it from a clean checkout and tests it).
PYTHON     ?= python3
VENV       ?= .venv
# Pinned on purpose: a bare or open-ended `torch` pulls a multi-GB CUDA build.
# Override for another build, e.g. `make test TORCH_SPEC="torch==2.9.1"`.
TORCH_SPEC ?= torch==2.13.0
PY          = $(VENV)/bin/python
STAMP       = $(VENV)/.installed

.PHONY: run test install clean bench dist dist-check

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

# Its own build environment (build/dist-venv: no torch, PyInstaller pinned in pyproject's `dist` extra).
dist:
	$(PYTHON) packaging/build_dist.py

dist-check: $(STAMP)
	CPUDOCTOR_DIST_CHECK=1 QT_QPA_PLATFORM=offscreen $(PY) -m pytest -q tests/test_dist.py

clean:
	rm -rf $(VENV) build dist *.egg-info test-output
