#!/usr/bin/env bash
# Set up the environment (or reuse it) and run the whole test suite.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -k batch_generator`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup_env.sh
# one pytest worker per core, each taking whole test files (their module fixtures train
# once); most tests wait on one single-threaded fairseq process at a time
python -m pytest tests -n auto --dist loadfile --durations=10 "$@"
