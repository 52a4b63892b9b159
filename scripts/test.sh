#!/usr/bin/env bash
# Set up the environment (or reuse it) and run the whole test suite.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -k batch_generator`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup_env.sh
python -m pytest tests --durations=10 "$@"
