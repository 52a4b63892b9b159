#!/usr/bin/env bash
# AutoAssist demo, end to end on a CPU:
#   set up .venv (if missing) -> synthetic parallel corpus -> prepare-corpus.sh ->
#   fairseq-train with the autoassist_translation task -> evaluate.sh -> summary.
# Everything goes to work/demo/ (git-ignored). Running it again reuses what is done:
# the corpus and the prepared data are kept, and training resumes from
# checkpoint_last.pt, which ends at once when the last epoch is already trained.
#
# Environment: DEMO_DIR (default work/demo), DEMO_PAIRS (training pairs, default 10000),
# DEMO_SEED (1), DEMO_BPE (joint BPE size, 2000), DEMO_CONFIG (configs/demo/transformer_tiny.args).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

usage() {
    cat <<EOF
Usage: $(basename "$0") [-h|--help]

AutoAssist end to end on a CPU: sets up .venv when missing (torch==2.13.0 CPU first),
generates a synthetic parallel corpus, prepares it with prepare-corpus.sh, trains a
tiny Transformer with the autoassist_translation task (tensorboard logs included),
evaluates it with evaluate.sh and prints a summary. Everything goes to DEMO_DIR; a
second run reuses what is done (the corpus, the prepared data, the trained epochs).

Options:
  -h, --help     print this help and exit

Settings (environment variables):
  DEMO_DIR       working directory (default: work/demo in the repository)
  DEMO_PAIRS     synthetic training pairs (default 10000)
  DEMO_SEED      seed of the synthetic corpus (default 1)
  DEMO_BPE       joint sentencepiece BPE size (default 2000)
  DEMO_CONFIG    fairseq-train flags file (default configs/demo/transformer_tiny.args)

Example:
  DEMO_PAIRS=5000 DEMO_DIR=/tmp/aa-demo bash scripts/demo.sh
EOF
}

case "${1:-}" in
    -h|--help) usage; exit 0 ;;
esac
cd "$ROOT"

# --- 0. environment -----------------------------------------------------------------
# creates or reuses .venv: torch==2.13.0 (CPU) first, then this package; see setup_env.sh
source "$ROOT/scripts/setup_env.sh"
_LOG_TAG=demo
# shellcheck source=scripts/_common.sh
source "$ROOT/scripts/_common.sh"   # activates .venv

DEMO="${DEMO_DIR:-$ROOT/work/demo}"
PAIRS="${DEMO_PAIRS:-10000}" SEED="${DEMO_SEED:-1}" BPE="${DEMO_BPE:-2000}"
CONFIG="${DEMO_CONFIG:-$ROOT/configs/demo/transformer_tiny.args}"
RAW="$DEMO/raw" DATA="$DEMO/data" CKPT="$DEMO/checkpoints"
mkdir -p "$DEMO"

# --- 1. synthetic corpus ----------------------------------------------------------------
T=$SECONDS
sig="pairs=$PAIRS seed=$SEED v1"
if [[ -f "$RAW/.done" && "$(cat "$RAW/.done")" == "$sig" ]]; then
    log "step corpus: reusing $RAW ($sig)"
else
    log "step corpus: generating $PAIRS synthetic training pairs (seed $SEED) into $RAW"
    rm -f "$RAW/.done"
    "$PYTHON" "$ROOT/scripts/make_synthetic_corpus.py" --out "$RAW" --pairs "$PAIRS" --seed "$SEED"
    echo "$sig" > "$RAW/.done"
fi
T_CORPUS=$((SECONDS - T))

# --- 2. preparation ----------------------------------------------------------------------
T=$SECONDS
bash "$ROOT/scripts/prepare-corpus.sh" --src src --tgt tgt --train "$RAW/train" \
    --valid "$RAW/valid" --test "$RAW/test" --out "$DATA" --bpe-size "$BPE"
T_PREP=$((SECONDS - T))

# --- 3. training ---------------------------------------------------------------------------
T=$SECONDS
mapfile -t TRAIN_ARGS < <(read_args "$CONFIG")
log "step train: fairseq-train $DATA ${TRAIN_ARGS[*]} --save-dir $CKPT"
mkdir -p "$CKPT"
echo "=== $(date '+%F %T') fairseq-train (resumes from $CKPT/checkpoint_last.pt if present) ===" >> "$DEMO/train.log"
fairseq-train "$DATA" "${TRAIN_ARGS[@]}" --save-dir "$CKPT" \
    --tensorboard-logdir "$DEMO/tensorboard" 2>&1 | tee -a "$DEMO/train.log"
T_TRAIN=$((SECONDS - T))

# --- 4. evaluation -----------------------------------------------------------------------------
T=$SECONDS
if [[ -s "$DEMO/evaluate.log" && "$DEMO/evaluate.log" -nt "$CKPT/checkpoint_best.pt" ]] \
        && grep -q '^sacreBLEU signature:' "$DEMO/evaluate.log"; then
    log "step evaluate: reusing $DEMO/evaluate.log (checkpoint_best.pt unchanged since)"
else
    bash "$ROOT/scripts/evaluate.sh" "$DATA" "$CKPT" --cpu | tee "$DEMO/evaluate.log.tmp"
    mv "$DEMO/evaluate.log.tmp" "$DEMO/evaluate.log"
fi
T_EVAL=$((SECONDS - T))

# --- 5. summary ----------------------------------------------------------------------------
BLEU="$(grep -m1 -o -E '^BLEU = [0-9.]+' "$DEMO/evaluate.log" | awk '{print $3}' || true)"
SIG="$(grep -m1 '^sacreBLEU signature:' "$DEMO/evaluate.log" | cut -d' ' -f3- || true)"
EPOCHS="$(grep -o -E '\| epoch [0-9]+ \| loss' "$DEMO/train.log" | tail -n1 | awk '{print $3}' || true)"
MAX_EPOCH="$(read_args "$CONFIG" | grep -A1 -x -- '--max-epoch' | tail -n1 || true)"
cat <<EOF

==================== AutoAssist demo: summary ====================
test BLEU (detokenised sacreBLEU): ${BLEU:-?}   [$SIG]
time: ${SECONDS}s in all = corpus ${T_CORPUS}s + preparation ${T_PREP}s + training ${T_TRAIN}s + evaluation ${T_EVAL}s
training: ${EPOCHS:+epoch $EPOCHS of }${MAX_EPOCH:-?} epochs (config $CONFIG)
EOF
# the last epoch line of the AutoAssist log: cumulative Boss and skipped tokens, accuracy
"$PYTHON" - "$DEMO/train.log" <<'PYEOF'
import re, sys
lines = [l for l in open(sys.argv[1]) if "| train | epoch" in l]
if lines:
    f = dict(re.findall(r"(\w+) ([-+\d.e]+)(?= \||$)", lines[-1].split("| train |")[1]))
    boss, skip = float(f.get("aa_boss_tok", 0)), float(f.get("aa_skip_tok", 0))
    print(f"Boss tokens:  {boss:,.0f} trained, {skip:,.0f} skipped by the Assistant "
          f"({skip / max(boss + skip, 1):.1%} of trained + skipped); "
          f"last epoch: accepted {float(f.get('aa_accept_tok', 1)):.1%} of the tokens")
    print(f"Assistant:    accuracy {float(f.get('aa_acc', 0)):.3f} "
          f"(always guessing the majority: {float(f.get('aa_acc_base', 0)):.3f}), "
          f"lambda {float(f.get('aa_lambda', 0)):.3f}, threshold T {float(f.get('aa_T', 0)):.3f}")
PYEOF
cat <<EOF
checkpoints:  $CKPT (checkpoint_best.pt, checkpoint_last.pt)
hypotheses:   $CKPT/hyp.checkpoint_best.test.tgt
logs:         $DEMO/train.log, $DEMO/evaluate.log, tensorboard: $DEMO/tensorboard
data:         $DATA (raw text and references in $DATA/raw)
rerun: bash scripts/demo.sh (reuses everything; rm -rf $DEMO to start over)
==================================================================
EOF
