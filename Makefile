# Quick start: `make run` (main job), `make test` (what CI runs).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
CORES ?= all
# Offline: make run MIRROR=../shared/data/mirror (or export NMT_MIRROR).
MIRROR ?=
SNAKE_CONFIG := $(if $(MIRROR),--config mirror=$(abspath $(MIRROR)),)

.PHONY: install run report test check format clean compare

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

# Ours against Joey NMT 2.3.0 and OpenNMT-py 3.5.1 on Multi30k (installs them under benchmarks/work/venvs).
compare: install
	$(BIN)/python benchmarks/compare_toolkits.py $(if $(MIRROR),--mirror $(abspath $(MIRROR)),) --budget-minutes 10

test: check
	$(BIN)/pytest

clean:
	rm -rf results tests/integration/results tests/integration/.snakemake
