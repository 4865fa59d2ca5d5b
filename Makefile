# benchflow: `make help` lists the targets. Every target sets up .venv itself
# (uv, from uv.lock), so a fresh clone needs nothing installed by hand.
SHELL := /bin/bash
UV_VERSION := 0.13.9
UV := .uv/bin/uv
VENV := .venv
PY := $(VENV)/bin/python
# Use the machine's Python; never let uv download an interpreter.
export UV_PYTHON := $(shell command -v python3)
export UV_PYTHON_DOWNLOADS := never

.DEFAULT_GOAL := help
.PHONY: help setup run demo test test-full bench lint format ui clean

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

$(UV):
	python3 -m venv .uv
	.uv/bin/pip install --quiet uv==$(UV_VERSION)

$(VENV)/.synced: pyproject.toml uv.lock | $(UV)
	$(UV) sync --locked
	@touch $@

setup: $(VENV)/.synced ## Create .venv from uv.lock (torch 2.9.0 + torch_xla 2.9.0, ~8 GB, cached)

run: setup ## Run the headline sweep: llama,dlrm x openxla,inductor on this machine
	$(PY) -m benchflow -m model=llama,dlrm dynamo=openxla,inductor

demo: run ## Same as `make run`

test: setup ## Run the default test suite (real torch_xla, Inductor, MLflow; ~10 min)
	$(PY) -m pytest

test-full: setup ## Run every test, including the long end-to-end ones
	$(PY) -m pytest -m "full or not full"

bench: setup ## Harness benchmarks: orchestration overhead, timing fidelity vs torch.utils.benchmark
	$(PY) benchmarks/harness_bench.py --out benchmarks/RESULTS.md

lint: setup ## ruff (lint + format check) and mypy on src/
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src tests benchmarks
	$(VENV)/bin/mypy

format: setup ## Apply ruff's formatting and safe fixes
	$(VENV)/bin/ruff format src tests benchmarks
	$(VENV)/bin/ruff check --fix src tests benchmarks

ui: setup ## MLflow UI on 127.0.0.1:5000 over the default local store
	$(VENV)/bin/mlflow ui --host 127.0.0.1 --port 5000 \
	  --backend-store-uri sqlite:///$(CURDIR)/mlflow.db --default-artifact-root $(CURDIR)/mlartifacts

clean: ## Remove run outputs, the local MLflow store and caches (keeps .venv)
	rm -rf runs mlflow.db mlartifacts .pytest_cache .mypy_cache .ruff_cache
	find multirun -mindepth 1 ! -name .gitkeep -exec rm -rf {} +
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
