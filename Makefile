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
# Grading workers: half the cores, at least one (a worker keeps about 1.7 cores busy).
JOBS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); echo $$(( n > 3 ? n / 2 : 1 )))
PYTEST_ARGS ?=
# The data set: $TINYSHAKESPEARE, else data/tinyshakespeare.txt, else a copy in ../shared/data
# beside the checkout (as on CI machines), else the notebooks download it once.
SHARED_DATA := $(wildcard $(CURDIR)/../shared/data/tinyshakespeare.txt)
ifeq ($(TINYSHAKESPEARE)$(wildcard data/tinyshakespeare.txt),)
ifneq ($(SHARED_DATA),)
export TINYSHAKESPEARE := $(abspath $(SHARED_DATA))
endif
endif
# Jupyter refuses to run as root unless told; containers and CI machines often are root.
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

ASSIGNMENTS ?= 01
GRADED ?=
DEST ?= build/student-release
NOTEBOOKS ?=
GRADESCOPE_ZIP ?= build/autograder.zip

# PyTorch's build (README, "Installing PyTorch"): TORCH=cpu (PyTorch's CPU index, ~190 MB),
# cuda (PyPI's build and its NVIDIA libraries, ~2.5-3 GB) or auto: cuda where nvidia-smi
# answers, else cpu. macOS and Windows get PyPI's build whatever TORCH says (it has no CUDA
# download there). The pin is requirements.txt's.
TORCH ?= auto
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
PLATFORM ?= $(if $(filter Windows_NT,$(OS)),Windows,$(shell uname -s))
ifeq ($(filter cpu cuda auto,$(TORCH)),)
$(error TORCH=$(TORCH): choose cpu, cuda or auto)
endif
TORCH_PIN = $(shell grep -m1 -E '^torch==' requirements.txt)
TORCH_GPU = $(shell nvidia-smi -L >/dev/null 2>&1 && echo yes)
TORCH_BUILD = $(if $(filter Linux,$(PLATFORM)),$(if $(filter auto,$(TORCH)),$(if $(TORCH_GPU),cuda,cpu),$(TORCH)),default)
TORCH_INSTALL = $(if $(filter cpu,$(TORCH_BUILD)),--index-url $(TORCH_CPU_INDEX) "$(TORCH_PIN)+cpu","$(TORCH_PIN)")
TORCH_WORDS = $(if $(filter default,$(TORCH_BUILD)),PyPI's build for $(PLATFORM),the $(TORCH_BUILD) build)

.PHONY: help venv lab test test-fast release grade lint format bench badges clean
.PHONY: student-release export jail gradescope

help:
	@echo "make lab      JupyterLab on the course for the instructor: formgrader on the class in OUT"
	@echo "make test     everything CI runs: notebooks re-executed, release, grader, browser"
	@echo "make grade    the autograder on the bundled example submissions -> $(OUT)/"
	@echo "make release  regenerate notebooks/ (and the example class) from solutions/ with nbgrader"
	@echo "make lint     ruff over the Python files and the notebooks"
	@echo "make bench    grading cost against bare execution, --jobs 1 against 2 and Dask; naming rate"
	@echo "make badges   rewrite Colab badges and setup cells from [tool.course] in pyproject.toml"
	@echo "make student-release ASSIGNMENTS=01,02 [GRADED=01] DEST=dir   the students' own tree"
	@echo "make export [FORMAT=canvas|moodle]   OUT/final-grades.csv (+ the platform's import CSV)"
	@echo "make gradescope NOTEBOOKS=02   $(GRADESCOPE_ZIP): Gradescope's autograder for them"
	@echo "TORCH=cpu|cuda|auto   PyTorch's build for .venv/ (auto: cuda where nvidia-smi answers)"

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	@echo "torch: $(TORCH_WORDS) (TORCH=$(TORCH) on $(PLATFORM))"
	$(PY) -m pip install -q $(TORCH_INSTALL)
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps -e .
	# rfc3987-syntax costs 4-5 s at every Jupyter import and nothing needs it at run time.
	$(PY) -m pip uninstall -y -q rfc3987-syntax || true
	$(PY) -m pip check
	touch $(STAMP)

venv: $(STAMP)

# bubblewrap, the jail of student code (scripts/install_bwrap.sh does nothing when it is there).
jail:
	@bash scripts/install_bwrap.sh

# Instructor mode: nbgrader's formgrader shows the class graded into OUT (if any) for hand
# grading. The token is made here so that the address printed first is the one to open.
lab: venv
	$(PY) -m autograder release --course-dir-only
	$(PY) -m autograder formgrade $(OUT) --if-graded
	@token=$$($(PY) -c 'import secrets; print(secrets.token_hex(24))'); \
	echo ""; \
	echo "  JupyterLab for the instructor (Nbgrader > Formgrader: hand grading of $(OUT)). Open:"; \
	echo "  http://127.0.0.1:$(PORT)/lab?token=$$token"; \
	echo ""; \
	JUPYTER_TOKEN=$$token exec $(BIN)/jupyter lab --no-browser --ServerApp.ip=127.0.0.1 \
	  --port=$(PORT) --ServerApp.port_retries=0 --ServerApp.root_dir=$(CURDIR) $(ROOT_FLAG)

# The students' own tree (no solutions, tests or grader); see `python -m autograder
# student-release --help` (--zip, --allow-placeholder).
student-release: venv
	$(PY) -m autograder student-release --assignments $(ASSIGNMENTS) --dest $(DEST) \
	  $(if $(GRADED),--graded $(GRADED),) $(STUDENT_RELEASE_ARGS)

# Gradescope's autograder for NOTEBOOKS (default all); GRADESCOPE_ARGS: e.g. --visibility hidden.
gradescope: venv
	$(PY) -m autograder gradescope $(if $(NOTEBOOKS),--notebooks $(NOTEBOOKS),) \
	  --out $(GRADESCOPE_ZIP) $(GRADESCOPE_ARGS)

# Final grades with the hand-graded points; FORMAT=canvas|moodle adds the import CSV.
export: venv
	$(PY) -m autograder export $(OUT) $(if $(FORMAT),--format $(FORMAT),) $(EXPORT_ARGS)

# The one-core tests (nbval, the browser, ...) run beside the rest: scripts/run_tests.sh.
test: venv jail
	bash scripts/run_tests.sh $(PY) $(PYTEST_ARGS)

test-fast: venv jail
	MPLBACKEND=Agg $(PY) -m pytest -q -m "not slow and not browser" tests $(PYTEST_ARGS)

release: venv
	$(PY) -m autograder release
	$(PY) -m autograder examples

grade: venv jail
	$(PY) -m autograder grade examples/submissions --out $(OUT) --jobs $(JOBS) --cell-timeout 30

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: venv
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: venv jail
	$(PY) benchmarks/bench_grade.py
	$(PY) benchmarks/naming_rate.py --examples 3 --budget 90

badges: venv
	$(PY) -m autograder.course.colab
	$(PY) -m autograder release

clean:
	rm -rf $(OUT) build .nbgrader .pytest_cache
