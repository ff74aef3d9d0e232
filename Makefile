# Quick start: `make run` (main job), `make test` (what CI runs).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
CORES ?= all
# Offline: make run MIRROR=../shared/data/mirror (or export NMT_MIRROR). make mirror MIRROR=DIR builds the
# tests' mirror from the public URLs (tests/mirror.sha256; MIRROR_FROM=DIR copies another instead), and
# make test MIRROR=DIR (or NMT_MIRROR=DIR) runs the tests with it; the default is ../shared/data/mirror.
MIRROR ?=
MIRROR_FROM ?=
SNAKE_CONFIG := $(if $(MIRROR),--config mirror=$(abspath $(MIRROR)),)
# make install TORCH=cpu: the CPU-only torch wheel (no CUDA libraries) from TORCH_INDEX, then the rest.
TORCH ?=
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
TORCH_PIN := $(shell grep -o 'torch==[0-9.]*' pyproject.toml)

.PHONY: install run report test check format clean compare mirror

$(BIN)/snakemake: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(if $(filter cpu,$(TORCH)),$(BIN)/pip install --quiet $(TORCH_PIN) --index-url $(TORCH_INDEX))
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
	$(BIN)/python benchmarks/compare_toolkits.py $(if $(MIRROR),--mirror $(abspath $(MIRROR)),) --budget-minutes 10 \
		--size $(or $(SIZE),tiny)

test: check
	$(if $(MIRROR),NMT_MIRROR=$(abspath $(MIRROR)) )$(BIN)/pytest

mirror: install
	$(BIN)/python tests/make_mirror.py --out $(or $(MIRROR),$(error usage: make mirror MIRROR=DIR)) \
		$(if $(MIRROR_FROM),--from $(abspath $(MIRROR_FROM)))

clean:
	rm -rf results tests/integration/results tests/integration/.snakemake
