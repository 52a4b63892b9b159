#!/usr/bin/env bash
# Prepare any raw parallel corpus for AutoAssist training with fairseq.
#
#   raw text (plain or .gz) -> clean (train only) -> joint sentencepiece BPE
#   -> fairseq-preprocess --joined-dictionary -> autoassist-features (train)
#
# Run with --help for the options. Finished steps are reused when run again with the
# same inputs (stamp files in OUT/.stamps record parameters and input sizes/mtimes).
set -euo pipefail

_LOG_TAG=prepare-corpus
# shellcheck source=scripts/_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"

usage() {
    cat <<EOF
Usage: $(basename "$0") --src SRC --tgt TGT --train PREFIX --valid PREFIX --test PREFIX
                         --out DIR [--bpe-size N] [--workers N]

Reads PREFIX.SRC and PREFIX.TGT (plain text or .gz, one sentence per line, line N of
one side translating line N of the other) for each split and writes to DIR:

  DIR/raw/{train,valid,test}.{SRC,TGT}   plain text; train cleaned (pairs with an empty
                                         side, a side outside 1-250 words or a length
                                         ratio > 1.5 dropped, aligned), valid/test kept
                                         as they are: the raw references for sacreBLEU
  DIR/spm/spm.model                      joint sentencepiece BPE model (model_type=bpe)
                                         trained on the cleaned train text of both sides
  DIR/spm/{train,valid,test}.{SRC,TGT}   the encoded text
  DIR/dict.*.txt, DIR/{train,valid,test}.SRC-TGT.*.{bin,idx}
                                         fairseq-preprocess --joined-dictionary output
  DIR/train.SRC-TGT.autoassist.*         autoassist-features output

Options:
  --bpe-size N   sentencepiece vocabulary size (default 8000; a soft limit)
  --workers N    fairseq-preprocess workers (default 2)

Example:
  $(basename "$0") --src en --tgt de --train raw/train --valid raw/val \\
      --test raw/test_2016_flickr --out data-bin/multi30k --bpe-size 8000
EOF
}

SRC= TGT= TRAIN= VALID= TEST= OUT= BPE_SIZE=8000 WORKERS=2
while [[ $# -gt 0 ]]; do
    case "$1" in
        --src) SRC="$2"; shift 2 ;;
        --tgt) TGT="$2"; shift 2 ;;
        --train) TRAIN="$2"; shift 2 ;;
        --valid) VALID="$2"; shift 2 ;;
        --test) TEST="$2"; shift 2 ;;
        --out) OUT="$2"; shift 2 ;;
        --bpe-size) BPE_SIZE="$2"; shift 2 ;;
        --workers) WORKERS="$2"; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; die "unknown argument: $1" ;;
    esac
done
for opt in SRC TGT TRAIN VALID TEST OUT; do
    [[ -n "${!opt}" ]] || { usage >&2; die "missing --$(echo "$opt" | tr 'A-Z' 'a-z')"; }
done
[[ "$SRC" != "$TGT" ]] || die "--src and --tgt must differ"

START=$SECONDS
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
STAMPS="$OUT/.stamps"
RAW="$OUT/raw"
SPM="$OUT/spm"
log "corpus $SRC-$TGT -> $OUT (joint sentencepiece BPE, vocabulary $BPE_SIZE)"

# --- 1. inputs: every file must exist -------------------------------------------------
declare -A INPUT
for split in train valid test; do
    case $split in train) prefix=$TRAIN ;; valid) prefix=$VALID ;; test) prefix=$TEST ;; esac
    for lang in "$SRC" "$TGT"; do
        INPUT[$split.$lang]="$(resolve_text "$prefix.$lang")" \
            || die "missing input file: $prefix.$lang (nor $prefix.$lang.gz) for the $split split"
    done
done

# --- 2. clean train, copy valid/test (line counts checked) ----------------------------
for split in train valid test; do
    in_src="${INPUT[$split.$SRC]}" in_tgt="${INPUT[$split.$TGT]}"
    out_src="$RAW/$split.$SRC" out_tgt="$RAW/$split.$TGT"
    filter=()
    [[ $split == train ]] && filter=(--filter --min-len 1 --max-len 250 --ratio 1.5)
    sig="$(signature v1 "${filter[@]}" "$in_src" "$in_tgt")"
    if step_is_done "$STAMPS" "text.$split" "$sig" "$out_src" "$out_tgt"; then
        log "step text/$split: reusing $out_src, $out_tgt (inputs unchanged)"
        continue
    fi
    if [[ $split == train ]]; then
        log "step text/$split: cleaning $in_src + $in_tgt (drop empty, keep 1-250 words, ratio <= 1.5)"
    else
        log "step text/$split: copying $in_src + $in_tgt unchanged (raw references)"
    fi
    step_reset "$STAMPS" "text.$split"
    "$PYTHON" "$REPO_ROOT/scripts/clean_corpus.py" --in-src "$in_src" --in-tgt "$in_tgt" \
        --out-src "$out_src" --out-tgt "$out_tgt" "${filter[@]}" \
        || die "step text/$split failed (see the message above)"
    [[ -s "$out_src" ]] || die "no sentence pairs left in $out_src after cleaning ${INPUT[$split.$SRC]}"
    step_done "$STAMPS" "text.$split" "$sig"
done

# --- 3. joint sentencepiece BPE model -------------------------------------------------
MODEL="$SPM/spm.model"
sig="$(signature v1 "$BPE_SIZE" "$RAW/train.$SRC" "$RAW/train.$TGT")"
if step_is_done "$STAMPS" spm-train "$sig" "$MODEL" "$SPM/spm.vocab"; then
    log "step bpe-train: reusing $MODEL (inputs unchanged)"
else
    log "step bpe-train: training joint sentencepiece BPE ($BPE_SIZE pieces) on $RAW/train.{$SRC,$TGT}"
    step_reset "$STAMPS" spm-train
    mkdir -p "$SPM"
    "$PYTHON" "$REPO_ROOT/scripts/spm_train_encode.py" train --model-prefix "$SPM/spm" \
        --vocab-size "$BPE_SIZE" "$RAW/train.$SRC" "$RAW/train.$TGT"
    step_done "$STAMPS" spm-train "$sig"
fi

# --- 4. encode all splits ---------------------------------------------------------------
ins=() outs=()
for split in train valid test; do
    for lang in "$SRC" "$TGT"; do ins+=("$RAW/$split.$lang"); outs+=("$SPM/$split.$lang"); done
done
sig="$(signature v1 "$MODEL" "${ins[@]}")"
if step_is_done "$STAMPS" spm-encode "$sig" "${outs[@]}"; then
    log "step bpe-encode: reusing $SPM/{train,valid,test}.{$SRC,$TGT} (inputs unchanged)"
else
    log "step bpe-encode: encoding train/valid/test with $MODEL"
    step_reset "$STAMPS" spm-encode
    "$PYTHON" "$REPO_ROOT/scripts/spm_train_encode.py" encode --model "$MODEL" \
        --inputs "${ins[@]}" --outputs "${outs[@]}"
    step_done "$STAMPS" spm-encode "$sig"
fi

# --- 5. fairseq-preprocess --------------------------------------------------------------
PAIR="$SRC-$TGT"
bin_outs=("$OUT/dict.$SRC.txt" "$OUT/dict.$TGT.txt")
for split in train valid test; do
    for lang in "$SRC" "$TGT"; do
        bin_outs+=("$OUT/$split.$PAIR.$lang.bin" "$OUT/$split.$PAIR.$lang.idx")
    done
done
sig="$(signature v1 "$WORKERS" "${outs[@]}")"
if step_is_done "$STAMPS" binarize "$sig" "${bin_outs[@]}"; then
    log "step binarize: reusing fairseq data in $OUT (inputs unchanged)"
else
    log "step binarize: fairseq-preprocess --joined-dictionary --workers $WORKERS -> $OUT"
    step_reset "$STAMPS" binarize
    rm -f "${bin_outs[@]}"   # fairseq-preprocess refuses to overwrite a dictionary
    fairseq-preprocess --source-lang "$SRC" --target-lang "$TGT" \
        --trainpref "$SPM/train" --validpref "$SPM/valid" --testpref "$SPM/test" \
        --destdir "$OUT" --joined-dictionary --workers "$WORKERS" 2>&1 | sed 's/^/    /'
    for f in "${bin_outs[@]}"; do [[ -f "$f" ]] || die "fairseq-preprocess did not write $f"; done
    step_done "$STAMPS" binarize "$sig"
fi

# --- 6. AutoAssist features of the training set -------------------------------------------
FEAT="$OUT/train.$PAIR.autoassist"
sig="$(signature v1 "$OUT/dict.$SRC.txt" "$OUT/dict.$TGT.txt" \
    "$OUT/train.$PAIR.$SRC.bin" "$OUT/train.$PAIR.$SRC.idx" "$OUT/train.$PAIR.$TGT.bin" "$OUT/train.$PAIR.$TGT.idx")"
if step_is_done "$STAMPS" features "$sig" "$FEAT.json"; then
    log "step features: reusing $FEAT.* (inputs unchanged)"
else
    log "step features: autoassist-features $OUT --source-lang $SRC --target-lang $TGT --split train"
    step_reset "$STAMPS" features
    autoassist-features "$OUT" --source-lang "$SRC" --target-lang "$TGT" --split train 2>&1 \
        | sed 's/^/    /'
    [[ -f "$FEAT.json" ]] || die "autoassist-features did not write $FEAT.json"
    step_done "$STAMPS" features "$sig"
fi

log "done in $((SECONDS - START))s: fairseq data in $OUT, raw references in $RAW, BPE model $MODEL"
