#!/usr/bin/env bash
# Build, on a machine that reaches PyPI, the wheels a GPU machine without a package
# registry lacks to run research/gpu/check.sh: fairseq-fixed (without its torch-linked
# extensions, so that it loads against any torch), its dependencies that are not
# part of a usual PyTorch image, and this package.
set -euo pipefail

usage() {
    cat <<EOF
Usage: bash research/gpu/build-wheelhouse.sh [--python PY] [--out DIR] [--keep-build]

Puts into DIR (default: gpu-wheelhouse/ in the repository root, git-ignored) the wheels
for PY's version (default: Python 3.12 from pyenv, the GPU machine's version):
  fairseq-fixed==$FAIRSEQ_VERSION   built here from its sdist without the extensions that link
                           against torch (libbase, libnat, alignment_train_*: not used in
                           translation training; a build against this machine's torch
                           would not load against the GPU machine's). Its Cython/C++
                           extensions (data_utils_fast, token_block_utils_fast, libbleu)
                           need only numpy and are built.
  $(printf '%s ' "${DEPENDENCIES[@]}")
                           fairseq's and the plugin's dependencies missing from a PyTorch
                           image (numpy, scipy, scikit-learn, sacrebleu, sentencepiece,
                           PyYAML, regex, tqdm, torchaudio are expected there)
  autoassist-fairseq       this package (check.sh puts the carried checkout first on
                           PYTHONPATH, so that the code under test is the checkout's)
Then checks the folder: one version per distribution, and at most $MAX_MIB MiB in all.

Carry DIR to the GPU machine with the repository (device tool: carry ["gpu-wheelhouse"]) and
run: bash research/gpu/check.sh   (docs/gpu.md).

Options:
  --python PY    interpreter whose version the wheels are for (default: $DEFAULT_PYTHON)
  --out DIR      output folder (default: \$REPO/gpu-wheelhouse); emptied first
  --keep-build   keep the build folder (under \$AA_GPU_BUILD_DIR, default
                 ~/.cache/autoassist-gpu-build) for a faster rebuild
  -h, --help     print this help and exit

Needs: network access to PyPI, a C++ compiler, about 2 minutes on 2 cores.
EOF
}

FAIRSEQ_VERSION=0.12.3.1
# Pinned to the versions this project's CPU environment runs with.
DEPENDENCIES=(
    hydra-core==1.3.2 omegaconf==2.3.0 antlr4-python3-runtime==4.9.3
    bitarray==3.12.3 cffi==2.1.1 pycparser==3.12 tensorboardX==2.6.5 setproctitle==1.3.8
    py3langid==0.4.0
)
MAX_MIB=60
DEFAULT_PYTHON="$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")/versions/3.12.1/bin/python3.12"
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

PY="$DEFAULT_PYTHON"
OUT_DIR="$REPO_ROOT/gpu-wheelhouse"
KEEP=0
while [[ $# -gt 0 ]]; do
    case "$1" in
        --python) PY="$2"; shift 2 ;;
        --out) OUT_DIR="$2"; shift 2 ;;
        --keep-build) KEEP=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "build-wheelhouse: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
log() { echo "[build-wheelhouse] $*"; }
die() { echo "[build-wheelhouse] ERROR: $*" >&2; exit 1; }

[[ -x "$PY" ]] || PY="$(command -v "$PY" || true)"
[[ -n "$PY" && -x "$PY" ]] || die "no Python interpreter at '$DEFAULT_PYTHON'; pass --python (e.g. --python python3.12)"
PYVER="$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
TAG="cp${PYVER/./}"
BUILD="${AA_GPU_BUILD_DIR:-$HOME/.cache/autoassist-gpu-build}/$TAG"
VENV="$BUILD/venv"
mkdir -p "$BUILD"
[[ $KEEP == 1 ]] || trap 'rm -rf "$BUILD/src" "$BUILD/stub"' EXIT

log "Python $PYVER ($PY) -> $OUT_DIR"
if [[ ! -x "$VENV/bin/python" ]]; then
    "$PY" -m venv "$VENV"
fi
# Build tools only: no torch (the torch-linked extensions are left out).
"$VENV/bin/python" -m pip install -q --disable-pip-version-check \
    "setuptools>=70" wheel "cython>=3" "numpy>=2"

rm -rf "$OUT_DIR" && mkdir -p "$OUT_DIR"

# 1. fairseq-fixed's sdist. pip prepares its metadata even for a download, and its
#    setup.py imports torch.utils.cpp_extension: a stub of that one module suffices.
mkdir -p "$BUILD/stub/torch/utils" "$BUILD/src"
touch "$BUILD/stub/torch/__init__.py" "$BUILD/stub/torch/utils/__init__.py"
cat >"$BUILD/stub/torch/utils/cpp_extension.py" <<'EOF'
# Metadata-only stand-in (build-wheelhouse.sh): the real build uses a patched setup.py.
from setuptools import Extension as CppExtension
from setuptools.command.build_ext import build_ext as BuildExtension
EOF
SDIST="$BUILD/fairseq_fixed-$FAIRSEQ_VERSION.tar.gz"
if [[ ! -f "$SDIST" ]]; then
    log "downloading fairseq-fixed==$FAIRSEQ_VERSION (sdist, ~11 MB)"
    PYTHONPATH="$BUILD/stub" "$VENV/bin/python" -m pip download -q --disable-pip-version-check \
        --no-deps --no-build-isolation --no-binary fairseq-fixed \
        "fairseq-fixed==$FAIRSEQ_VERSION" -d "$BUILD"
fi
rm -rf "$BUILD/src" && mkdir -p "$BUILD/src"
tar xzf "$SDIST" -C "$BUILD/src"
SRC="$BUILD/src/fairseq_fixed-$FAIRSEQ_VERSION"
"$VENV/bin/python" "$REPO_ROOT/research/gpu/patch_fairseq_setup.py" "$SRC/setup.py"

# 2. The wheel, built against numpy 2 (whose C API also serves later numpy 2.x).
log "building fairseq-fixed $FAIRSEQ_VERSION for $TAG without torch-linked extensions"
(cd "$SRC" && nice -n 10 "$VENV/bin/python" -m pip wheel -q --disable-pip-version-check \
    --no-deps --no-build-isolation -w "$OUT_DIR" .)

# 3. Dependencies: binary wheels where PyPI has them for this Python, else built here.
log "fetching ${DEPENDENCIES[*]}"
"$VENV/bin/python" -m pip wheel -q --disable-pip-version-check --no-deps --prefer-binary \
    -w "$OUT_DIR" "${DEPENDENCIES[@]}"

# 4. This package (pure Python).
log "building autoassist-fairseq"
"$VENV/bin/python" -m pip wheel -q --disable-pip-version-check --no-deps --no-build-isolation \
    -w "$OUT_DIR" "$REPO_ROOT"
rm -rf "$REPO_ROOT/build"

# Checks: every wheel for this Python or pure; one version of each; size.
for whl in "$OUT_DIR"/*.whl; do
    name="$(basename "$whl")"
    [[ "$name" == *-py3-none-any.whl || "$name" == *-py2.py3-none-any.whl || "$name" == *"-$TAG-"* ]] \
        || die "$name is not for Python $PYVER"
done
dups="$(ls "$OUT_DIR" | cut -d- -f1 | tr 'A-Z' 'a-z' | sort | uniq -d)"
[[ -z "$dups" ]] || die "more than one wheel of: $dups"
mib=$(( $(du -sk "$OUT_DIR" | cut -f1) / 1024 ))
(( mib <= MAX_MIB )) || die "$OUT_DIR holds $mib MiB, over the $MAX_MIB MiB that may travel"
ls -1 "$OUT_DIR"
log "done: $(ls "$OUT_DIR" | wc -l) wheels, $mib MiB in $OUT_DIR"
