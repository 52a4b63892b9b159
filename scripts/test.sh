#!/usr/bin/env bash
# Set up the environment (or reuse it) and run the whole test suite.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -k batch_generator`.
set -euo pipefail
usage() {
    cat <<EOF
Usage: bash scripts/test.sh [-h|--help] [--help-pytest] [PYTEST_ARGS...]

Sets up .venv when missing (scripts/setup_env.sh: torch==2.13.0 CPU first, then this
package with fairseq and its test extra) and runs the whole test suite, one pytest-xdist
worker per core. Tests that read ../shared/data skip with the reason where that folder is
not beside the checkout.

Options:
  -h, --help        print this help and exit (nothing is set up)
  --help-pytest     set up, then print pytest's own help
  PYTEST_ARGS       passed to pytest

Examples:
  bash scripts/test.sh                       # everything, as CI runs it
  bash scripts/test.sh -k batch_generator    # the tests whose name matches
  bash scripts/test.sh -m "not slow" -n 0    # no test that trains or prepares a corpus, serially
EOF
}
case "${1:-}" in
    -h|--help) usage; exit 0 ;;
    --help-pytest) set -- --help "${@:2}" ;;
esac
cd "$(dirname "$0")/.."
source scripts/setup_env.sh
# one thread per process: the tests' Bosses are tiny, and every run has a second process
# (its Assistant; in the two-worker tests, a second Boss and Assistant) that needs the
# other core more than the Boss's matrix products do
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
# one pytest-xdist worker per core; a test file runs whole on one worker, and files that
# read the same session run share one, longest first (tests/conftest.py); `-n 0` runs serially
python -m pytest tests -n auto --dist loadfile --no-loadscope-reorder --durations=10 "$@"
