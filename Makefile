# Two commands matter: `make run` and `make test`. Both create the venv on first use.
# A third, for people who package the app: `make dist` (the standalone app, no torch inside;
# see packaging/build_dist.py) and `make dist-check` (builds it from a clean checkout and tests it).
PYTHON     ?= python3
VENV       ?= .venv
# Pinned on purpose: a bare or open-ended `torch` pulls a multi-GB CUDA build.
# Override for another build, e.g. `make test TORCH_SPEC="torch==2.9.1"`.
TORCH_SPEC ?= torch==2.13.0
PY          = $(VENV)/bin/python
# Two stamps: `make run` installs what the app needs, `make test` adds the test extras (pytest, hypothesis,
# opencv, intel-openmp: real situations the tests set up). The app's own venv is not one to train in,
# and CPU Doctor never describes it by default while another environment exists.
APP_STAMP   = $(VENV)/.installed-app
STAMP       = $(VENV)/.installed

.PHONY: run test install clean bench imports fuzz dist dist-check

$(APP_STAMP): pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet -e . "$(TORCH_SPEC)"
	touch $(APP_STAMP)

$(STAMP): $(APP_STAMP)
	$(PY) -m pip install --quiet -e ".[test]" "$(TORCH_SPEC)"
	touch $(STAMP)

install: $(STAMP)

# Before the install (a minute): a desktop without the X11 libraries Qt needs hears it now, with the apt line
# (gui/x11_libs.py is standard library only). X11_CHECK=no skips it: the app then prints its report instead.
X11_CHECK ?= yes
run:
	@[ "$(X11_CHECK)" = no ] || $(PYTHON) gui/x11_libs.py
	@$(MAKE) --no-print-directory $(APP_STAMP)
	$(VENV)/bin/cpudoctor

# Two passes: the quick tests on TEST_WORKERS processes (pytest-xdist), with the slow ones that measure
# nothing of the machine (marked `alongside`: emulated CPUs, fresh venvs, crashes); then the other slow ones
# (real training, sampled jobs, sweeps) one at a time, because they measure the machine and a second test
# beside them is the interference they would report. Exit code 5 (nothing selected, e.g. PYTEST_ARGS names
# one file) is fine.
TEST_WORKERS ?= 2
test: $(STAMP)
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -m "not slow or alongside" -n $(TEST_WORKERS) $(PYTEST_ARGS) || [ $$? -eq 5 ]
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -m "slow and not alongside" $(PYTEST_ARGS) || [ $$? -eq 5 ]

# The layer contracts alone (pyproject.toml [tool.importlinter]); `make test` runs them too.
imports: $(STAMP)
	$(PY) tests/import_contracts.py

# The hostile-input fuzz suite (issue 19) with many examples per family; `make test` runs a few.
# Override the count: `make fuzz FUZZ_EXAMPLES=2000`. The figures land in test-output/fuzz-summary.json.
FUZZ_EXAMPLES ?= 300
fuzz: $(STAMP)
	CPUDOCTOR_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) QT_QPA_PLATFORM=offscreen $(PY) -m pytest -p no:cacheprovider \
		tests/test_fuzz.py $(PYTEST_ARGS); status=$$?; cat test-output/fuzz-summary.json; exit $$status

# Its own build environment (build/dist-venv: no torch, PyInstaller pinned in pyproject's `dist` extra).
dist:
	$(PYTHON) packaging/build_dist.py

dist-check: $(STAMP)
	CPUDOCTOR_DIST_CHECK=1 QT_QPA_PLATFORM=offscreen $(PY) -m pytest -q tests/test_dist.py

clean:
	rm -rf $(VENV) build dist *.egg-info test-output
