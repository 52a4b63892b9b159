#!/usr/bin/env bash
# Fixed-budget arms on one GPU in one command of the device tool: each arm in its own
# research.fixed_budget process (in parallel: a small Transformer leaves the GPU mostly
# idle), optionally beside the GPU check's steps; at the deadline every run is stopped, and
# the logs and summaries are packed into OUT (docs/gpu.md, "Fixed-budget arms on a GPU").
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
usage() {
    cat <<EOF
Usage: bash research/gpu/fixed_budget.sh --data-tgz FILE --corpus NAME
           (--budget-epochs N | --budget-updates N) --arms ARM@SHARE,... [--config NAME]
           [--seed S] [--runs-tgz FILE] [--check-steps LIST] [--check-args "..."]
           [--deadline S] [--work DIR] [--out DIR] [--no-install] [-- FIXED_BUDGET_ARGS...]

  --data-tgz FILE    a prepared data directory (prepare-corpus.sh's output: fairseq data,
                     features, raw/test.*) packed with tar czf, carried with the repository
  --corpus NAME      its name in the summaries
  --budget-epochs N, --budget-updates N
                     B, as for research.fixed_budget
  --arms LIST        ARM@SHARE,...: one research.fixed_budget process per arm, all at once,
                     each running only its own (--listed-only: a --rule after -- runs
                     where an item names it)
                     (random@S needs default@S first: list them as one item,
                     "default@0.7+random@0.7", which run one after the other);
                     ARM@SHARE/SCHEDULE gives that run --schedule SCHEDULE (cosine,
                     linear or rex), e.g. "plain@0.7/rex,plain@0.7/linear,plain@0.7"
  --config NAME      configs/**/NAME.args (default multi30k/transformer_small); its --cpu
                     is dropped (run_benchmark --gpu)
  --seed "S ..."     seeds (default 1); each item runs once per seed, all at once
  --runs-tgz FILE    folders made beforehand for the runs of this corpus, unpacked into
                     WORK/runs/NAME: the filtered corpora of plain-checked (filtered-data)
                     and plain-opusfilter (opusfilter-data, which needs opusfilter, absent
                     on the GPU machine), written where they will be used (their links
                     point into WORK/data/NAME, the unpacked --data-tgz)
  --check-steps LIST also run research/gpu/check.sh --steps LIST beside the arms, on the
                     unpacked --data-tgz corpus
  --check-args "..." more options for that check.sh (e.g. --cpp-traces)
  --deadline S       seconds after the start at which unfinished runs are stopped
                     (default 540); the packing then takes a few seconds
  --work DIR         (default /tmp/autoassist-gpu-fixed-budget)
  --out DIR          (default \$OUT, else ./gpu-fixed-budget-out): runs.tgz (every run's
                     train.log, cpu.json and BLEU logs, every arm's summary, the console
                     logs, nvidia-smi's view), and the check's gpu-check.json and .log
  --no-install       use the current Python as it is
  -- ARGS...         more options for every research.fixed_budget process (--skip-bleu,
                     --extra-args "...", --dry-run, ...)

Settings: PYTHON (with --no-install: the interpreter), OMP_NUM_THREADS (each run's CPU
threads, default 2; 1 where the processes outnumber half the cores).
EOF
}

TGZ=""; RUNS_TGZ=""; CHECK_ARGS=""; CORPUS=""; BUDGET=(); ARMS=""; CONFIG=multi30k/transformer_small; SEED=1; CHECK=""
DEADLINE=540; WORK=/tmp/autoassist-gpu-fixed-budget; OUT_DIR="${OUT:-$PWD/gpu-fixed-budget-out}"
INSTALL=1; MORE=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --data-tgz) TGZ="$2"; shift 2 ;;
        --corpus) CORPUS="$2"; shift 2 ;;
        --budget-epochs|--budget-updates) BUDGET=("$1" "$2"); shift 2 ;;
        --arms) ARMS="$2"; shift 2 ;;
        --config) CONFIG="$2"; shift 2 ;;
        --seed) SEED="$2"; shift 2 ;;
        --runs-tgz) RUNS_TGZ="$2"; shift 2 ;;
        --check-steps) CHECK="$2"; shift 2 ;;
        --check-args) CHECK_ARGS="$2"; shift 2 ;;
        --deadline) DEADLINE="$2"; shift 2 ;;
        --work) WORK="$2"; shift 2 ;;
        --out) OUT_DIR="$2"; shift 2 ;;
        --no-install) INSTALL=0; shift ;;
        -h|--help) usage; exit 0 ;;
        --) shift; MORE=("$@"); break ;;
        *) echo "fixed_budget.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
[[ -f "$TGZ" && -n "$CORPUS" && ${#BUDGET[@]} == 2 && -n "$ARMS" ]] \
    || { echo "fixed_budget.sh: --data-tgz FILE, --corpus, a budget and --arms are required (see --help)" >&2; exit 2; }
[[ -z "$RUNS_TGZ" || -f "$RUNS_TGZ" ]] \
    || { echo "fixed_budget.sh: --runs-tgz $RUNS_TGZ not found" >&2; exit 2; }
log() { echo "[gpu-fixed-budget] $(date +%T) $*"; }
mkdir -p "$WORK/console" "$OUT_DIR"
WORK="$(cd "$WORK" && pwd)"; OUT_DIR="$(cd "$OUT_DIR" && pwd)"

PY="${PYTHON:-python3}"
if [[ $INSTALL == 1 ]]; then
    bash "$REPO_ROOT/research/gpu/check.sh" --install-only --work "$WORK/check"
    PY="$WORK/check/venv/bin/python"
fi
export PYTHONPATH="$REPO_ROOT${PYTHONPATH:+:$PYTHONPATH}" PYTHON="$PY" OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"
export PATH="$(dirname "$(command -v "$PY")"):$PATH"

DATA="$WORK/data/$CORPUS"
mkdir -p "$DATA" && tar xzf "$TGZ" -C "$DATA"
if [[ -n "$RUNS_TGZ" ]]; then
    mkdir -p "$WORK/runs/$CORPUS" && tar xzf "$RUNS_TGZ" -C "$WORK/runs/$CORPUS"
fi

# the GPU's utilisation and memory every 20 s while the runs go on
nvidia-smi --query-gpu=timestamp,name,driver_version,utilization.gpu,memory.used --format=csv \
    -l 20 > "$WORK/console/nvidia-smi.csv" 2>&1 &
SMI=$!
PIDS=()
if [[ -n "$CHECK" ]]; then
    log "GPU check, steps $CHECK"
    # shellcheck disable=SC2086  # CHECK_ARGS: several options
    setsid bash "$REPO_ROOT/research/gpu/check.sh" --no-install --steps "$CHECK" --work "$WORK/check" \
        --data "$DATA" --out "$OUT_DIR" --time-limit "$(( DEADLINE - SECONDS ))" $CHECK_ARGS \
        > "$WORK/console/check.log" 2>&1 &
    PIDS+=($!)
fi
IFS=, read -r -a ITEMS <<< "$ARMS"
for seed in $SEED; do for item in "${ITEMS[@]}"; do
    tag="${item//[@+\/]/_}-s$seed"
    log "arms $item, seed $seed"
    setsid bash -c 'for arm in ${1//+/ }; do
            schedule=(); [[ "$arm" == */* ]] && schedule=(--schedule "${arm#*/}")
            "$PYTHON" -m research.gpu.run_benchmark fixed_budget --gpu --data "$2" --config "$3" \
                --corpus "$4" --work "$5" --results "$6" --seed "$7" --arms "${arm%%/*}" \
                --listed-only "${@:8}" "${schedule[@]}" || exit
        done' _ "$item" "$DATA" "$CONFIG" "$CORPUS" "$WORK/runs" "$WORK/results/$tag" "$seed" "${BUDGET[@]}" "${MORE[@]}" \
        > "$WORK/console/arms-$tag.log" 2>&1 &
    PIDS+=($!)
done; done
stop_all() { for p in "${PIDS[@]}"; do kill -TERM -- "-$p" 2>/dev/null || true; done; }
trap 'stop_all; kill "$SMI" 2>/dev/null; exit 130' INT TERM
while (( SECONDS < DEADLINE )); do
    alive=0
    for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    (( alive )) || break
    sleep 5
done
if (( SECONDS >= DEADLINE )); then
    log "deadline ${DEADLINE}s: stopping the runs still going"
    stop_all; sleep 15
    for p in "${PIDS[@]}"; do kill -KILL -- "-$p" 2>/dev/null || true; done
fi
kill "$SMI" 2>/dev/null || true  # before the wait: nvidia-smi -l never ends by itself
wait || true
for f in "$WORK"/console/*.log; do echo "== $f"; tail -n 4 "$f"; done
(cd "$WORK" && find runs results console -type f ! -name '*.pt' -print0 2>/dev/null \
    | tar czf "$OUT_DIR/runs.tgz" --null -T -) || true
log "packed: $(ls "$OUT_DIR" | tr '\n' ' ')"
