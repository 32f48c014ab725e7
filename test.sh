#!/usr/bin/env bash
# Install what is missing (as main.sh does), then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")"
. scripts/install.sh
python -m pytest -q "$@"
