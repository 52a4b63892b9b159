#!/usr/bin/env bash
# The GPU check in one command: install the carried wheelhouse into a virtual environment
# that sees the machine's torch, generate a small corpus, run every step with a PASS, FAIL
# or SKIP line, and write one JSON summary (docs/gpu.md).
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
usage() {
    cat <<EOF
Usage: bash research/gpu/check.sh [--cpu-dry-run] [--steps all|core|perf|NAME,...]
                                 [--out DIR] [--wheelhouse DIR] [--no-install] [--work DIR]
                                 [--time-limit S] [--install-only]
                                 [--cpp-traces] [--data DIR]

Run from the repository root of a machine with one CUDA GPU, torch and no fairseq, with
the folder built by research/gpu/build-wheelhouse.sh beside it (gpu-wheelhouse/):
  1. a virtual environment in WORK/venv that sees the system's packages (torch), with
     fairseq-fixed, this package and the rest from the wheelhouse (pip --no-index); the
     checkout comes first on PYTHONPATH, so that the code under test is the carried one;
  2. a synthetic corpus (scripts/make_synthetic_corpus.py, then scripts/prepare-corpus.sh),
     or the prepared corpus that --data names;
  3. the steps (python -m research.gpu.check_steps --help lists them): fairseq-train on
     CUDA in fp32, --fp16 and --amp; a process group of one rank (nccl) with and without
     fairseq's spawn; a killed Assistant under --assistant-fallback error and uniform; the
     Boss's seconds per million tokens against --task translation; an equal-compute
     comparison (plain, the default, the random control) with tokens per second.
Writes OUT/gpu-check.json (the summary), OUT/gpu-check.log (every run's output) and the
benchmarks' results; exits 0 when no step failed.

On a GPU, the steps of 'all' take more than the 10 minutes one command of the device tool
may run: run '--steps core' and '--steps perf' as two commands (docs/gpu.md).

Options:
  --cpu-dry-run     the same steps on CPU with tiny sizes (a minute on 2 cores); the
                    CUDA-only ones SKIP with the reason, nccl becomes gloo
  --steps LIST      all (default), core (env to kill_uniform), perf (overhead,
                    equal_compute), or step names separated by commas
  --out DIR         folder of the summary (default: \$OUT when set, else ./gpu-check-out)
  --wheelhouse DIR  the carried wheels (default: ./gpu-wheelhouse)
  --no-install      use the current Python as it is (fairseq and this package installed)
  --work DIR        runs, corpus and venv (default: /tmp/autoassist-gpu-check)
  --time-limit S    seconds for the whole command; steps not started by then SKIP
                    (default: 570 on a GPU, none for --cpu-dry-run)
  --cpp-traces      the runs print their threads' C++ and Python stacks on a fatal signal
                    (research/gpu/fatal_traces), to find what aborts a run
  --data DIR        a corpus prepared by scripts/prepare-corpus.sh (its train.kept-lines and
                    feature file) to run the steps on, instead of generating one (the
                    generated one: 30,000 pairs, or 400 for --cpu-dry-run; kept in WORK)
  --install-only    stop after step 1 (the environment in WORK/venv, its imports checked),
                    for commands that run other work with it (research/gpu/fixed_budget.sh)
  -h, --help        print this help and exit

Settings: PYTHON, the interpreter that holds torch (default python3).
EOF
}

DRY=0; STEPS=all; OUT_DIR="${OUT:-$PWD/gpu-check-out}"; WHEELHOUSE="$REPO_ROOT/gpu-wheelhouse"
INSTALL=1; WORK=/tmp/autoassist-gpu-check; LIMIT=""; INSTALL_ONLY=0; TRACES=0; DATA=
while [[ $# -gt 0 ]]; do
    case "$1" in
        --cpu-dry-run) DRY=1; shift ;;
        --steps) STEPS="$2"; shift 2 ;;
        --out) OUT_DIR="$2"; shift 2 ;;
        --wheelhouse) WHEELHOUSE="$2"; shift 2 ;;
        --no-install) INSTALL=0; shift ;;
        --work) WORK="$2"; shift 2 ;;
        --time-limit) LIMIT="$2"; shift 2 ;;
        --install-only) INSTALL_ONLY=1; shift ;;
        --cpp-traces) TRACES=1; shift ;;
        --data) DATA="$2"; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "check.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
log() { echo "[check] $*"; }
die() { echo "[check] ERROR: $*" >&2; exit 1; }
[[ -n "$LIMIT" || $DRY == 1 ]] || LIMIT=570
mkdir -p "$WORK" "$OUT_DIR"
if [[ -n "$DATA" ]]; then
    [[ -f "$DATA/train.kept-lines" ]] \
        || die "--data $DATA holds no corpus prepared by scripts/prepare-corpus.sh (no train.kept-lines): prepare it with that script, or leave --data out to generate one"
    DATA="$(cd "$DATA" && pwd)"
fi
WORK="$(cd "$WORK" && pwd)"; OUT_DIR="$(cd "$OUT_DIR" && pwd)"
PY="${PYTHON:-python3}"

# 1. Environment ---------------------------------------------------------------------------
if [[ $INSTALL == 1 ]]; then
    ls "$WHEELHOUSE"/fairseq_fixed-*.whl >/dev/null 2>&1 \
        || die "no fairseq-fixed wheel in $WHEELHOUSE: build it with research/gpu/build-wheelhouse.sh and carry the folder (or pass --no-install)"
    VENV="$WORK/venv"
    if [[ ! -x "$VENV/bin/python" ]]; then
        log "virtual environment $VENV (sees $PY's packages)"
        # a Python without ensurepip (Debian's, without python3-venv) makes a venv without
        # pip: the system's pip then installs into it (pip --python, pip >= 22.3)
        "$PY" -m venv --system-site-packages "$VENV" 2>/dev/null \
            || { rm -rf "$VENV"; "$PY" -m venv --system-site-packages --without-pip "$VENV"; } \
            || die "$PY cannot create a virtual environment"
        # --system-site-packages reaches the *base* interpreter's packages; where $PY is
        # itself a venv (the GPU image's python3 is /opt/torch/.venv), torch lies in that
        # venv's site-packages: a .pth file adds $PY's package folders after the new ones.
        "$PY" -c 'import sys; print("\n".join(p for p in sys.path if p.endswith(("site-packages", "dist-packages"))))' \
            > "$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/_autoassist_system_site.pth"
    fi
    log "installing autoassist-fairseq with fairseq-fixed and the rest from $WHEELHOUSE (no index)"
    # --no-deps: pip would otherwise weigh the system's packages against the new venv's own
    # (a Python 3.11 venv brings an old setuptools that torch's metadata refuses); the
    # imports below check that every dependency is there. --ignore-installed: the wheels go
    # into the venv even where the system holds the same version
    PIP=("$VENV/bin/python" -m pip)
    "$VENV/bin/python" -m pip --version >/dev/null 2>&1 || PIP=("$PY" -m pip --python "$VENV/bin/python")
    "${PIP[@]}" install -q --disable-pip-version-check --no-index --no-deps --ignore-installed \
        "$WHEELHOUSE"/*.whl || die "pip could not install the wheels of $WHEELHOUSE (see above)"
    PY="$VENV/bin/python"
fi
# the code under test is the checkout's, whichever build of the package is installed
export PYTHONPATH="$REPO_ROOT${PYTHONPATH:+:$PYTHONPATH}"
PY="$(command -v "$PY")"
export PATH="$(dirname "$PY"):$PATH" PYTHON="$PY" VIRTUAL_ENV="${VIRTUAL_ENV:-$(dirname "$(dirname "$PY")")}"
MODULES="torch fairseq fairseq.data.data_utils_fast autoassist_fairseq hydra omegaconf bitarray numpy scipy sklearn threadpoolctl sacrebleu sentencepiece tqdm yaml regex"
"$PY" -c "import importlib, importlib.util, sys
missing = [m for m in sys.argv[1:] if not importlib.util.find_spec(m.split('.')[0]) or not importlib.import_module(m)]
sys.exit(f'missing modules: {missing}' if missing else 0)" $MODULES \
    || die "$PY cannot import what the check needs (above): carry the wheels (research/gpu/build-wheelhouse.sh)"
if [[ $INSTALL_ONLY == 1 ]]; then log "environment ready: $PY"; exit 0; fi

# 2. Corpus --------------------------------------------------------------------------------
if [[ $DRY == 1 ]]; then
    PAIRS=400; HELD=40; BPE=120; WORKERS=1
else
    PAIRS=30000; HELD=500; BPE=4000; WORKERS=8
fi
[[ -n "$DATA" ]] || DATA="$WORK/data-$PAIRS"
if [[ ! -f "$DATA/train.kept-lines" ]]; then
    log "corpus: $PAIRS synthetic pairs -> $DATA"
    "$PY" "$REPO_ROOT/scripts/make_synthetic_corpus.py" --out "$WORK/raw-$PAIRS" \
        --pairs "$PAIRS" --valid "$HELD" --test "$HELD" --seed 1 >/dev/null
    bash "$REPO_ROOT/scripts/prepare-corpus.sh" --src src --tgt tgt --train "$WORK/raw-$PAIRS/train" \
        --valid "$WORK/raw-$PAIRS/valid" --test "$WORK/raw-$PAIRS/test" --out "$DATA" \
        --bpe-size "$BPE" --workers "$WORKERS" > "$WORK/prepare.log" 2>&1 \
        || { tail -20 "$WORK/prepare.log"; die "corpus preparation failed (log: $WORK/prepare.log)"; }
fi

# 3. Steps ---------------------------------------------------------------------------------
ARGS=(--data "$DATA" --out "$OUT_DIR" --work "$WORK/runs" --steps "$STEPS")
[[ $DRY == 0 ]] || ARGS+=(--cpu-dry-run)
[[ $TRACES == 0 ]] || ARGS+=(--cpp-traces)
[[ -z "$LIMIT" ]] || ARGS+=(--time-limit "$(( LIMIT - SECONDS ))")
cd "$REPO_ROOT"
exec "$PY" -m research.gpu.check_steps "${ARGS[@]}"
