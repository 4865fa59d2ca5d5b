# benchflow: `make help` lists the targets. Every target sets up .venv itself
# (uv, from uv.lock), so a fresh clone needs nothing installed by hand.
SHELL := /bin/bash
UV_VERSION := 0.13.9
UV := .uv/bin/uv
VENV := .venv
PY := $(VENV)/bin/python
# Use the machine's Python, by its real path (given a pyenv shim's, uv removed and made
# .venv again at every sync); never let uv download an interpreter.
export UV_PYTHON := $(shell python3 -c 'import sys; print(sys.executable)')
export UV_PYTHON_DOWNLOADS := never
# Let Python keep the bytecode of what it imports (in .venv and in __pycache__ folders,
# which git ignores). A shell or image that sets PYTHONDONTWRITEBYTECODE (this VM does)
# otherwise makes every process compile torch, MLflow and torch_xla from source again:
# on this VM `import torch` takes 5.2 CPU-s instead of 2.9, MLflow's client 6.7
# instead of 2.2, torch_xla 18 instead of 8; a sweep starts several such processes.
unexport PYTHONDONTWRITEBYTECODE

.DEFAULT_GOAL := help
.PHONY: help setup browser slurm-install slurm-up slurm-down postgres-up postgres-down ray-up ray-down run demo docs test test-full test-gpu gpu-wheels bench compare-xr coverage lint format ui clean

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

$(UV):
	python3 -m venv .uv
	.uv/bin/pip install --quiet uv==$(UV_VERSION)

# The extras of pyproject.toml that .venv holds: ray (hydra/launcher=ray), suites
# (suite=huggingface, suite=timm), xla (torch_xla: the XLA backends); torchbench (tqdm,
# onnx for some TorchBench models) on request: `make setup EXTRAS="ray suites xla
# torchbench"`. `uv sync` is exact (it removes
# what it is not asked for), so every sync here names them all, and the stamp holds the
# extras it was made with: asking for others syncs again, as a newer lock does. Without
# EXTRAS= a target keeps the extras .venv was made with (the stamp's) beside the
# default ones; only an EXTRAS= that leaves one out removes it.
STAMP := $(VENV)/.synced
DEFAULT_EXTRAS := ray suites xla
EXTRAS ?= $(sort $(DEFAULT_EXTRAS) $(shell cat $(STAMP) 2>/dev/null))

# --compile-bytecode: the packages' bytecode written once, in parallel, at install;
# without it the first processes to import torch each compile it (a fresh clone's
# test suite starts dozens at once).
setup: | $(UV) ## Create .venv from uv.lock with EXTRAS (torch 2.9.0 + torch_xla 2.9.0, ~8 GB, cached)
	@if [ "$$(cat $(STAMP) 2>/dev/null)" != "$(sort $(EXTRAS))" ] \
	  || [ pyproject.toml -nt $(STAMP) ] || [ uv.lock -nt $(STAMP) ]; then \
	  echo "$(UV) sync --locked --compile-bytecode $(addprefix --extra ,$(sort $(EXTRAS)))"; \
	  $(UV) sync --locked --compile-bytecode $(addprefix --extra ,$(sort $(EXTRAS))) \
	    && echo "$(sort $(EXTRAS))" > $(STAMP); \
	fi
	@$(if $(filter setup,$(MAKECMDGOALS)),$(HOW_TO_RUN),true)

# What `make setup` prints at its end: how to run what it installed.
HOW_TO_RUN = printf '%s\n' \
  "benchflow is installed in .venv (extras: $(sort $(EXTRAS))). From this folder:" \
  "  .venv/bin/benchflow --help" \
  "or activate the venv once per shell (source .venv/bin/activate), then: benchflow --help"

run: setup ## Run the headline sweep: llama,dlrm x openxla,inductor on this machine
	$(VENV)/bin/benchflow -m model=llama,dlrm dynamo=openxla,inductor

demo: run ## Same as `make run`

# The MLflow UI browser test drives Debian's chromium with its chromedriver. Installed
# with apt when missing and we may (root, or sudo without a password); otherwise a loud
# warning, and that one test skips. Never fails the build.
BROWSER_BINS := /usr/bin/chromium /usr/bin/chromedriver
browser: ## Install Debian's chromium + chromedriver for the MLflow UI browser test (apt; root or sudo)
	@if ls $(BROWSER_BINS) >/dev/null 2>&1; then \
	  echo "browser: chromium and chromedriver present"; \
	elif ! command -v apt-get >/dev/null 2>&1; then \
	  echo "WARNING: no apt-get here: install chromium + chromedriver yourself, or the MLflow UI browser test is SKIPPED"; \
	else \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; elif sudo -n true 2>/dev/null; then SUDO="sudo -n"; else SUDO=none; fi; \
	  if [ "$$SUDO" = none ]; then \
	    echo "WARNING: not root and no passwordless sudo: run 'sudo apt-get install chromium chromium-driver', or the MLflow UI browser test is SKIPPED"; \
	  else \
	    echo "browser: installing Debian's chromium + chromium-driver with apt-get"; \
	    ( $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q --no-install-recommends chromium chromium-driver ) >/tmp/benchflow-browser-install.log 2>&1 \
	      && echo "browser: installed" \
	      || { tail -5 /tmp/benchflow-browser-install.log; echo "WARNING: apt-get failed (log: /tmp/benchflow-browser-install.log): the MLflow UI browser test is SKIPPED"; }; \
	  fi; \
	fi

# Real services on this host (services/, docs/launchers.md): each keeps its state and
# PID files under $BENCHFLOW_SERVICES_DIR (default /tmp/benchflow-services) and is
# stopped by those PIDs. The tests start their own, in a folder of their own.
slurm-install: setup ## Install Debian's SLURM (slurmctld, slurmd) and munge with apt, if missing (root or sudo)
	$(PY) services/slurm.py install

slurm-up: setup ## A single-host SLURM cluster (munged, slurmctld, slurmd; partition debug; its env: services/slurm.py env)
	$(PY) services/slurm.py up

slurm-down: ## Stop the SLURM cluster (its jobs cancelled), by PID
	$(PY) services/slurm.py down

postgres-up: setup ## PostgreSQL (127.0.0.1:5433) with an MLflow server on it (http://127.0.0.1:5001, artifacts served); PG_PORT=, MLFLOW_PORT= (0: free ones)
	$(PY) services/postgres.py up $(if $(PG_PORT),--port $(PG_PORT)) $(if $(MLFLOW_PORT),--mlflow-port $(MLFLOW_PORT))

postgres-down: ## Stop the MLflow server and PostgreSQL, by PID (the data stay)
	$(PY) services/postgres.py down

ray-up: setup ## A Ray cluster of two nodes on this host (a head and a worker, 1 CPU each)
	$(PY) services/ray_cluster.py up

ray-down: ## Stop both Ray nodes, by PID
	$(PY) services/ray_cluster.py down

# The reference (docs/, mkdocs.yml) as a site in site/ (git-ignored). --strict: a broken
# link or anchor is an error (not with --quiet: it hides the warnings strict counts).
# NO_MKDOCS_2_WARNING: Material's notice about its successor.
docs: setup ## Build the docs site into site/ (mkdocs-material, --strict: zero warnings)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

test: setup browser docs ## Run the default test suite (real torch_xla, Inductor, MLflow on PostgreSQL, chromium; 634 tests, 5-8 min on 2 cores by the host's speed)
	$(PY) -m pytest

test-full: setup browser slurm-install ## Run every test, including the long end-to-end ones
	$(PY) -m pytest -m "full or not full"

# The gpu lane (docs/gpu.md). A GPU machine with its own Python and torch and no
# package registry gets the few packages it lacks as wheels, made here at the lock's
# versions (gpu-wheels, into .whl/), installed there beside its torch (test-gpu).
GPU_PACKAGES := hydra-core omegaconf orjson hydra-joblib-launcher
GPU_PYTHON ?= 3.12
GPU_SITE ?= /tmp/benchflow-site
# pip itself, for its download and wheel commands, on the machine's Python: making the
# wheels leaves .venv as it is (a sync to the default EXTRAS removed a developer's
# torchbench extra)
PIP = $(UV) tool run --python $(UV_PYTHON) pip
gpu-wheels: | $(UV) ## The wheels a GPU machine lacks, at the lock's versions, into .whl/ (GPU_PYTHON=3.12)
	rm -rf .whl && mkdir -p .whl
	$(UV) export --no-hashes --format requirements-txt --all-extras --no-emit-project \
	  | grep -E "^($$(echo $(GPU_PACKAGES) | tr ' ' '|'))==" | cut -d' ' -f1 > .whl/requirements.txt
	$(PIP) download -q --no-deps --only-binary=:all: --python-version $(GPU_PYTHON) \
	  --implementation cp --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
	  -d .whl -r .whl/requirements.txt
	$(PIP) wheel -q --no-deps -w .whl \
	  "$$($(UV) export --no-hashes --format requirements-txt --no-emit-project | grep -E '^antlr4-python3-runtime==' | cut -d' ' -f1)"
	@ls .whl

test-gpu: ## The gpu lane, on a GPU machine: its python3 and torch, with .whl/ (docs/gpu.md)
	python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
	  --target $(GPU_SITE) .whl/*.whl
	PYTHONPATH=$(CURDIR)/src:$(GPU_SITE) python3 -m pytest -p no:cacheprovider -m gpu tests/test_gpu.py

# With XLA_CHECKOUT= and TORCHBENCH_ROOT= (as for compare-xr) it adds the TorchBench grid
# against the experiment runner (about 15 minutes more).
bench: EXTRAS += $(if $(and $(XLA_CHECKOUT),$(TORCHBENCH_ROOT)),torchbench)
bench: setup ## Harness benchmarks: time per phase, a 1,000-job sweep, timing fidelity (XLA_CHECKOUT=, TORCHBENCH_ROOT=: the TorchBench grid too)
	$(PY) benchmarks/harness_bench.py --out benchmarks/RESULTS.md $(if $(and $(XLA_CHECKOUT),$(TORCHBENCH_ROOT)),--xla $(XLA_CHECKOUT) --torchbench $(TORCHBENCH_ROOT))

# benchmarks/compare_xr.py: both checkouts outside this project, found by path, e.g.
#   make compare-xr XLA_CHECKOUT=~/src/xla TORCHBENCH_ROOT=~/src/benchmark MODELS=llama,dlrm
# The runner and dlrm import tqdm and onnx: the `torchbench` extra adds them.
COMPARE_OUT ?= compare_xr
compare-xr: EXTRAS += torchbench
compare-xr: setup ## benchflow vs PyTorch/XLA's experiment runner (XLA_CHECKOUT=, TORCHBENCH_ROOT=, MODELS=)
	@test -n "$(XLA_CHECKOUT)" -a -n "$(TORCHBENCH_ROOT)" || { echo "compare-xr: set XLA_CHECKOUT=<pytorch/xla checkout at v2.9.0> and TORCHBENCH_ROOT=<pytorch/benchmark checkout>"; exit 2; }
	$(PY) benchmarks/compare_xr.py --xla $(XLA_CHECKOUT) --torchbench $(TORCHBENCH_ROOT) --out $(COMPARE_OUT) $(if $(MODELS),--models $(MODELS))

# benchmarks/torchbench_coverage.py: every TorchBench model, by both tools, one model and test at a
# time (compare-xr's run for each), into $(COVERAGE_OUT)/coverage.md; resumable. E.g.
#   make coverage XLA_CHECKOUT=~/src/xla TORCHBENCH_ROOT=~/src/benchmark MODELS=alexnet TESTS=eval
COVERAGE_OUT ?= coverage
coverage: EXTRAS += torchbench
coverage: setup ## Every TorchBench model by benchflow and the experiment runner (XLA_CHECKOUT=, TORCHBENCH_ROOT=, MODELS=, TESTS=, PASSES=)
	@test -n "$(XLA_CHECKOUT)" -a -n "$(TORCHBENCH_ROOT)" || { echo "coverage: set XLA_CHECKOUT=<pytorch/xla checkout at v2.9.0> and TORCHBENCH_ROOT=<pytorch/benchmark checkout>"; exit 2; }
	$(PY) benchmarks/torchbench_coverage.py --xla $(XLA_CHECKOUT) --torchbench $(TORCHBENCH_ROOT) --out $(COVERAGE_OUT) --explained benchmarks/coverage_notes.csv --ab $(if $(MODELS),--models $(MODELS)) $(if $(TESTS),--tests $(TESTS)) $(if $(PASSES),--passes $(PASSES))

lint: setup ## ruff (lint + format check), mypy (src/, services/, benchmarks/), import-linter
	$(VENV)/bin/ruff check src tests benchmarks services
	$(VENV)/bin/ruff format --check src tests benchmarks services
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-cache

format: setup ## Apply ruff's formatting and safe fixes
	$(VENV)/bin/ruff format src tests benchmarks services
	$(VENV)/bin/ruff check --fix src tests benchmarks services

ui: setup ## MLflow UI on 127.0.0.1:5000 over the default local store
	$(VENV)/bin/benchflow ui

clean: ## Remove run outputs, the local MLflow store and caches (keeps .venv)
	rm -rf runs site mlflow.db mlartifacts .pytest_cache .mypy_cache .ruff_cache
	find multirun -mindepth 1 ! -name .gitkeep -exec rm -rf {} +
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
