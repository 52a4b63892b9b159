#!/usr/bin/env bash
# Create or reuse the project's virtual environment in .venv and activate it.
# Sourced by scripts/test.sh and scripts/demo.sh. The install is redone only when
# setup.py changes; pip's wheel cache keeps the fairseq build (about 4 minutes) for reuse.
set -euo pipefail
if [[ "${BASH_SOURCE[0]}" == "$0" && ( "${1:-}" == -h || "${1:-}" == --help ) ]]; then
    cat <<EOF
Usage: source scripts/setup_env.sh   (or: bash scripts/setup_env.sh [-h|--help])

Creates .venv in the repository when missing, installs torch==2.13.0 (CPU) first and
then this package with its test, plot, tensorboard and opusfilter extras, and activates
.venv when sourced. The install is redone only when setup.py changes (stamp: .venv/.autoassist-installed).

Options:
  -h, --help   print this help and exit (nothing is installed)

Settings (environment variables):
  PYTHON            the interpreter that creates .venv (default python3)
  TORCH_INDEX_URL   pip index of the torch wheel (default: pip's configured index; where
                    that serves CUDA builds, https://download.pytorch.org/whl/cpu)

Example:
  source scripts/setup_env.sh && python -m pytest tests/test_tfidf.py -q
EOF
    exit 0
fi
_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
_venv="$_root/.venv"
_python="${PYTHON:-python3}"
if [ ! -x "$_venv/bin/python" ]; then
    echo "[setup] creating virtual environment $_venv"
    "$_python" -m venv "$_venv"
fi
# shellcheck disable=SC1091
source "$_venv/bin/activate"
_stamp="$_venv/.autoassist-installed"
_want="$(sha256sum "$_root/setup.py" | cut -d' ' -f1)"
if [ ! -f "$_stamp" ] || [ "$(cat "$_stamp")" != "$_want" ]; then
    echo "[setup] installing torch==2.13.0 (CPU) first, so pip never pulls a CUDA build"
    python -m pip install --quiet ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"} torch==2.13.0
    echo "[setup] installing autoassist-fairseq with its test, plot, tensorboard and opusfilter extras (fairseq builds once, ~4 min)"
    python -m pip install --quiet -e "$_root[test,plot,tensorboard,opusfilter]"
    echo "$_want" > "$_stamp"
else
    echo "[setup] reusing $_venv"
fi
