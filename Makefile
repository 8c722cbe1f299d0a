# The course's commands. Every target creates .venv/ on first use; nothing touches the system Python.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(abspath $(VENV))/bin
PY := $(BIN)/python
STAMP := $(VENV)/.installed
export PATH := $(BIN):$(PATH)
PORT ?= 8888
OUT ?= grading-output
JOBS ?= 2
PYTEST_ARGS ?=
# Jupyter refuses to run as root unless told; containers and CI machines often are root.
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

.PHONY: help venv lab test test-fast release grade lint format bench badges clean

help:
	@echo "make lab      JupyterLab on the course (formgrader and widgets included)"
	@echo "make test     everything CI runs: notebooks re-executed, release, grader, browser"
	@echo "make grade    the autograder on the bundled example submissions -> $(OUT)/"
	@echo "make release  regenerate notebooks/ (and the example class) from solutions/ with nbgrader"
	@echo "make lint     ruff over the Python files and the notebooks"
	@echo "make bench    grading cost against bare execution; --jobs 1 against --jobs 2"
	@echo "make badges   rewrite Colab badges and setup cells from [tool.course] in pyproject.toml"

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps -e .
	# rfc3987-syntax costs 4-5 s at every Jupyter import and nothing needs it at run time.
	$(PY) -m pip uninstall -y -q rfc3987-syntax || true
	$(PY) -m pip check
	touch $(STAMP)

venv: $(STAMP)

lab: venv
	$(PY) -m autograder release --course-dir-only
	$(BIN)/jupyter lab --no-browser --port=$(PORT) --ServerApp.root_dir=$(CURDIR) $(ROOT_FLAG)

test: venv
	MPLBACKEND=Agg $(PY) -m pytest -q --nbval-lax --nbval-cell-timeout=300 tests solutions $(PYTEST_ARGS)

test-fast: venv
	MPLBACKEND=Agg $(PY) -m pytest -q -m "not slow and not browser" tests $(PYTEST_ARGS)

release: venv
	$(PY) -m autograder release
	$(PY) -m autograder examples

grade: venv
	$(PY) -m autograder grade examples/submissions --out $(OUT) --jobs $(JOBS) --cell-timeout 30

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: venv
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: venv
	$(PY) benchmarks/bench_grade.py

badges: venv
	$(PY) -m autograder.colab
	$(PY) -m autograder release

clean:
	rm -rf $(OUT) build .nbgrader .pytest_cache
