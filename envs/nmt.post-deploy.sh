#!/usr/bin/env bash
# Runs inside the new conda env (snakemake --use-conda): make the repository's nmt package importable.
set -euo pipefail
pip install --no-deps -e "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."
