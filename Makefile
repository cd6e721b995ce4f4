# Every target creates .venv and installs what it needs on a fresh machine.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: report test lint lab docs install-check bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test,docs,lab]"
	touch $(STAMP)

## The main job: an HTML report over the bundled fixtures, offline, with the built-in summarizers
## (--force: a second run replaces the report.html of the first).
report: $(STAMP)
	$(VENV)/bin/zett-lab report fixtures/sessions.sqlite -o report.html --force

## Lint and format check (ruff) and type check (mypy); `make test` runs them first so a finding fails fast.
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

## The whole test suite (browser tests need Debian's chromium: `apt-get install chromium`).
test: lint
	$(PY) -m pytest -n 2 --durations=15

## JupyterLab on the bundled notebooks.
lab: $(STAMP)
	$(VENV)/bin/zett-lab lab

## The documentation site, into build/docs/html/ (strict: a warning fails; the notebooks are executed offline).
docs: $(STAMP)
	$(PY) -m sphinx -W --keep-going -n -q -b html docs build/docs/html

## Build the sdist and wheel, install the wheel into a fresh venv outside the repository, run zett-lab there.
install-check: $(STAMP)
	PY=$(PY) .ci/install-check

## Benchmarks (ratios measured in the same run; not part of the test suite).
bench: $(STAMP)
	for script in $(filter-out bench/long_session.py bench/validity_pool.py bench/validity_dossiers.py,$(wildcard bench/*.py)); do echo "== $$script"; $(PY) $$script || exit 1; done

clean:
	rm -rf $(VENV) report.html test-output .pytest_cache build/docs docs/notebooks
