#!/usr/bin/env bash
# Set up the environment (or reuse it) and run the whole test suite.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -k batch_generator`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup_env.sh
# one thread per process: the tests' Bosses are tiny, and every run has a second process
# (its Assistant; in the two-worker tests, a second Boss and Assistant) that needs the
# other core more than the Boss's matrix products do
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
# one pytest-xdist worker per core; a test file runs whole on one worker, and files that
# read the same session run share one, longest first (tests/conftest.py); `-n 0` runs serially
python -m pytest tests -n auto --dist loadfile --no-loadscope-reorder --durations=10 "$@"
