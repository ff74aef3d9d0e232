# Quick start: `make run` (main job), `make test` (what CI runs).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
CORES ?= all
# Offline: make run MIRROR=../shared/data/mirror (or export NMT_MIRROR).
MIRROR ?=
SNAKE_CONFIG := $(if $(MIRROR),--config mirror=$(abspath $(MIRROR)),)

.PHONY: install run report test check format clean

$(BIN)/snakemake: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $@

install: $(BIN)/snakemake

run: install
	$(BIN)/snakemake --cores $(CORES) $(SNAKE_CONFIG)

check: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/snakemake --lint

format: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# The HTML report of the last run: tables, learning curves, cleaning reports, runtimes.
report: install
	$(BIN)/snakemake --report results/report.html $(SNAKE_CONFIG)

test: check
	$(BIN)/pytest

clean:
	rm -rf results tests/integration/results tests/integration/.snakemake
