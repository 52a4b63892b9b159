#!/usr/bin/env bash
# Translate a test set with a trained checkpoint and score it with detokenised sacreBLEU.
# Run with --help for the options.
set -euo pipefail

_LOG_TAG=evaluate
# shellcheck source=scripts/_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"

usage() {
    cat <<EOF
Usage: $(basename "$0") DATA_DIR CHECKPOINT_DIR [--avg-last N] [--subset test] [--beam 4]
                   [--lenpen 0.6] [--user-dir DIR] [--checkpoint NAME] [--max-tokens N]
                   [--source-lang SRC --target-lang TGT] [--tokenize TOK] [--cpu]
                   [-- FAIRSEQ_GENERATE_ARGS...]

DATA_DIR is a directory written by prepare-corpus.sh (fairseq data plus the raw
references in DATA_DIR/raw/SUBSET.TGT); CHECKPOINT_DIR the --save-dir of fairseq-train.

  1. --avg-last N (N > 1): average the last N checkpoints (update checkpoints
     checkpoint_E_U.pt when present, otherwise epoch checkpoints checkpointE.pt) into
     CHECKPOINT_DIR/checkpoint.avgN.pt; otherwise use --checkpoint (default
     checkpoint_best.pt, or checkpoint_last.pt when there is no best).
  2. fairseq-generate DATA_DIR --gen-subset SUBSET --beam 4 --lenpen 0.6
     --remove-bpe sentencepiece --user-dir <plugin>   (output: CHECKPOINT_DIR/generate-*.txt)
     with --required-batch-size-multiple 1: with the default of 8, fairseq 0.12's batch_by_size
     can drop the last (n mod 8) sentences of the split from the last batch
  3. hypotheses back in input order -> CHECKPOINT_DIR/hyp.<checkpoint>.SUBSET.TGT,
     detokenised sacreBLEU against DATA_DIR/raw/SUBSET.TGT: prints the score and the
     sacreBLEU signature.

Options:
  --avg-last N         average the last N checkpoints first (a whole number N >= 2;
                       default: no averaging)
  --subset NAME        the split to translate and score: test or valid (default test)
  --beam N             beam size of fairseq-generate (default 4)
  --lenpen X           length penalty of fairseq-generate (default 0.6)
  --user-dir DIR       fairseq plugin directory (default: this repository's
                       autoassist_fairseq: it registers the autoassist_translation task
                       and loads checkpoints on torch >= 2.6)
  --checkpoint NAME    checkpoint file in CHECKPOINT_DIR (default checkpoint_best.pt,
                       or checkpoint_last.pt when there is no best)
  --max-tokens N       tokens per batch of fairseq-generate (default 8000)
  --source-lang SRC    source language (default: read from the file names in DATA_DIR)
  --target-lang TGT    target language (default: read from the file names in DATA_DIR)
  --tokenize TOK       sacreBLEU tokenizer (default 13a; e.g. zh for Chinese, ja-mecab
                       for Japanese, which needs pip install sacrebleu[ja])
  --cpu                translate on the CPU
  -- ARGS...           the rest goes to fairseq-generate unchanged
                       (e.g. -- --max-len-a 1.2 --max-len-b 10)
  -h, --help           print this help and exit

Example:
  $(basename "$0") work/multi30k/data work/multi30k/ckpt --avg-last 5 --cpu
EOF
}

[[ $# -ge 1 && ( "$1" == -h || "$1" == --help ) ]] && { usage; exit 0; }
[[ $# -ge 2 ]] || { usage >&2; die "DATA_DIR and CHECKPOINT_DIR are required"; }
DATA="$1" CKPT_DIR="$2"; shift 2
AVG= SUBSET=test BEAM=4 LENPEN=0.6 USER_DIR="$REPO_ROOT/autoassist_fairseq" CKPT_NAME=
MAX_TOKENS=8000 SRC= TGT= TOKENIZE=() EXTRA=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --avg-last|--subset|--beam|--lenpen|--user-dir|--checkpoint|--max-tokens|--source-lang|\
        --target-lang|--tokenize)
            [[ $# -ge 2 ]] || { usage >&2; die "$1 needs a value"; } ;;
    esac
    case "$1" in
        --avg-last) AVG="$2"; shift 2 ;;
        --subset) SUBSET="$2"; shift 2 ;;
        --beam) BEAM="$2"; shift 2 ;;
        --lenpen) LENPEN="$2"; shift 2 ;;
        --user-dir) USER_DIR="$2"; shift 2 ;;
        --checkpoint) CKPT_NAME="$2"; shift 2 ;;
        --max-tokens) MAX_TOKENS="$2"; shift 2 ;;
        --source-lang) SRC="$2"; shift 2 ;;
        --target-lang) TGT="$2"; shift 2 ;;
        --tokenize) TOKENIZE=(--tokenize "$2"); shift 2 ;;
        --cpu) EXTRA+=(--cpu); shift ;;
        --) shift; EXTRA+=("$@"); break ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; die "unknown argument: $1" ;;
    esac
done
# the values, before anything runs (a bad one must not cost a whole fairseq-generate)
if [[ -n "$AVG" ]]; then
    [[ "$AVG" =~ ^[0-9]+$ ]] && (( 10#$AVG >= 2 )) \
        || die "--avg-last needs a whole number of at least 2 (got '$AVG'): how many of the last checkpoints to average; leave it out to score one checkpoint (--checkpoint)"
    AVG=$((10#$AVG))
fi
case "$SUBSET" in
    test|valid) ;;
    *) die "--subset must be test or valid (got '$SUBSET'): only for these does DATA_DIR/raw/SUBSET.TGT hold the references line for line (prepare-corpus.sh filters the training pairs after writing DATA_DIR/raw/train.*, so train hypotheses would be scored against the wrong references)" ;;
esac
if [[ ${#TOKENIZE[@]} -gt 0 ]]; then
    problem="$("$PYTHON" "$REPO_ROOT/scripts/sacrebleu_score.py" --check-tokenize "${TOKENIZE[1]}" 2>&1)" \
        || die "--tokenize ${TOKENIZE[1]}: ${problem#ERROR: }"
fi
[[ -d "$DATA" ]] || die "data directory not found: $DATA"
[[ -d "$CKPT_DIR" ]] || die "checkpoint directory not found: $CKPT_DIR"

if [[ -z "$SRC" || -z "$TGT" ]]; then
    idx="$(ls "$DATA" | grep -E "^$SUBSET\.[^.]+-[^.]+\.[^.]+\.idx$" | head -n1 || true)"
    [[ -n "$idx" ]] || die "no binarised '$SUBSET' split in $DATA (expected $SUBSET.SRC-TGT.*.idx)"
    pair="${idx#"$SUBSET".}"; pair="${pair%%.*}"
    SRC="${SRC:-${pair%-*}}" TGT="${TGT:-${pair#*-}}"
fi
REF="$DATA/raw/$SUBSET.$TGT"
require_file "$REF" "raw reference written by prepare-corpus.sh"

START=$SECONDS
if [[ -n "$AVG" ]]; then
    CKPT="$CKPT_DIR/checkpoint.avg$AVG.pt"
    log "averaging the last $AVG checkpoints of $CKPT_DIR -> $CKPT"
    "$PYTHON" "$REPO_ROOT/scripts/average_checkpoints.py" --dir "$CKPT_DIR" --last "$AVG" --output "$CKPT"
elif [[ -n "$CKPT_NAME" ]]; then
    CKPT="$CKPT_DIR/$CKPT_NAME"
elif [[ -f "$CKPT_DIR/checkpoint_best.pt" ]]; then
    CKPT="$CKPT_DIR/checkpoint_best.pt"
else
    CKPT="$CKPT_DIR/checkpoint_last.pt"
fi
require_file "$CKPT" "checkpoint"

name="$(basename "$CKPT" .pt)"
GEN_OUT="$CKPT_DIR/generate-$name.$SUBSET.txt"
HYP="$CKPT_DIR/hyp.$name.$SUBSET.$TGT"
log "translating $DATA ($SUBSET, $SRC->$TGT) with $CKPT: beam $BEAM, lenpen $LENPEN"
if ! fairseq-generate "$DATA" --path "$CKPT" --user-dir "$USER_DIR" \
        --source-lang "$SRC" --target-lang "$TGT" --gen-subset "$SUBSET" \
        --beam "$BEAM" --lenpen "$LENPEN" --remove-bpe sentencepiece \
        --max-tokens "$MAX_TOKENS" --required-batch-size-multiple 1 "${EXTRA[@]}" \
        > "$GEN_OUT" 2> "$GEN_OUT.log"; then
    tail -n 30 "$GEN_OUT.log" >&2
    die "fairseq-generate failed (full log: $GEN_OUT.log)"
fi
grep -h -o -E 'Translated .*|Generate .*' "$GEN_OUT.log" "$GEN_OUT" | sed 's/^/    /' || true

log "detokenised sacreBLEU against $REF"
"$PYTHON" "$REPO_ROOT/scripts/sacrebleu_score.py" --generate-output "$GEN_OUT" --ref "$REF" --hyp-out "$HYP" \
    "${TOKENIZE[@]}"
log "done in $((SECONDS - START))s (fairseq-generate output: $GEN_OUT)"
