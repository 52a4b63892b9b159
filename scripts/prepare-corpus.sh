#!/usr/bin/env bash
# Prepare any raw parallel corpus for AutoAssist training with fairseq.
#
#   raw text (plain or .gz) -> drop empty / absurdly long pairs (train only) -> joint
#   sentencepiece BPE -> length and ratio filters on the subword pieces (train only)
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
                         --out DIR [--bpe-size N] [--workers N] [--min-len N] [--max-len N]
                         [--ratio R] [--ratio-slack N] [--absolute-ratio] [--no-ratio-filter]
                         [--max-chars N]

Reads PREFIX.SRC and PREFIX.TGT (plain text or .gz, one sentence per line, line N of
one side translating line N of the other) for each split and writes to DIR:

  DIR/raw/{valid,test}.{SRC,TGT}         the valid/test text as it is: the raw
                                         references for sacreBLEU
  DIR/raw/train.{SRC,TGT}                the training text without the pairs that have
                                         an empty side or a side over --max-chars
                                         characters (the text the BPE model learns from)
  DIR/spm/spm.model                      joint sentencepiece BPE model (model_type=bpe)
                                         trained on DIR/raw/train.{SRC,TGT}
  DIR/spm/{train,valid,test}.{SRC,TGT}   the encoded text; train without the pairs that
                                         the filters on subword pieces drop (below)
  DIR/dict.*.txt, DIR/{train,valid,test}.SRC-TGT.*.{bin,idx}
                                         fairseq-preprocess --joined-dictionary output
  DIR/train.SRC-TGT.autoassist.*         autoassist-features output
  DIR/train.kept-lines                   for each pair of the binarised training set, in
                                         order, the 0-based line number of its pair in
                                         the --train input

Training pairs are filtered as fairseq's WMT recipe does (clean-corpus-n on the BPE
output): lengths are counted in pieces of the joint BPE, so that languages segmented
differently (e.g. pre-segmented Japanese against English) are measured alike, and the
length ratio is compared with the corpus's median ratio rather than with 1. When the
filters drop more than 10% of the pairs, a warning names each rule with its count and
the flag that changes it.

Options:
  --src LANG        source language code: the suffix of the source files (required)
  --tgt LANG        target language code: the suffix of the target files (required)
  --train PREFIX    training text PREFIX.SRC / PREFIX.TGT, plain or .gz (required)
  --valid PREFIX    validation text, kept as it is (required)
  --test PREFIX     test text, kept as it is (required)
  --out DIR         output data directory (required)
  --bpe-size N      sentencepiece vocabulary size (default 8000; a soft limit); at
                    least the number of characters of the training text + 1
  --workers N       fairseq-preprocess workers (default 2; at least 1)
  --min-len N       drop training pairs with a side of fewer than N pieces (default 1)
  --max-len N       drop training pairs with a side of more than N pieces; 0: no limit
                    (default 250)
  --ratio R         drop training pairs whose SRC/TGT piece ratio differs from the
                    corpus's median ratio by more than a factor R (default 1.5)
  --ratio-slack N   pieces a side may have beyond the ratio, so that a word more or
                    less does not drop a short pair (default 2; 0 with --absolute-ratio)
  --absolute-ratio  compare the ratio with 1 instead of the median (Moses'
                    clean-corpus-n rule; only for pairs segmented alike, such as en-de)
  --no-ratio-filter
                    keep training pairs whatever their length ratio
  --max-chars N     before BPE, drop training pairs with a side of more than N
                    characters; 0: no limit (default 2000)
  -h, --help        print this help and exit

Examples:
  $(basename "$0") --src en --tgt de --train raw/train --valid raw/val \\
      --test raw/test_2016_flickr --out data-bin/multi30k --bpe-size 8000
  $(basename "$0") --src en --tgt ja --train raw/train --valid raw/dev \\
      --test raw/test --out data-bin/en-ja --bpe-size 16000 --ratio 2
EOF
}

SRC= TGT= TRAIN= VALID= TEST= OUT= BPE_SIZE=8000 WORKERS=2
MIN_LEN=1 MAX_LEN=250 RATIO=1.5 RATIO_MODE=median MAX_CHARS=2000 RATIO_SLACK=
while [[ $# -gt 0 ]]; do
    case "$1" in
        -h|--help) usage; exit 0 ;;
        --no-ratio-filter) RATIO_MODE=off; shift; continue ;;
        --absolute-ratio) [[ $RATIO_MODE == off ]] || RATIO_MODE=absolute; shift; continue ;;
        --src|--tgt|--train|--valid|--test|--out|--bpe-size|--workers|--min-len|--max-len|\
        --ratio|--ratio-slack|--max-chars)
            [[ $# -ge 2 ]] || { usage >&2; die "$1 needs a value"; } ;;
        *) usage >&2; die "unknown argument: $1" ;;
    esac
    case "$1" in
        --src) SRC="$2" ;;
        --tgt) TGT="$2" ;;
        --train) TRAIN="$2" ;;
        --valid) VALID="$2" ;;
        --test) TEST="$2" ;;
        --out) OUT="$2" ;;
        --bpe-size) BPE_SIZE="$2" ;;
        --workers) WORKERS="$2" ;;
        --min-len) MIN_LEN="$2" ;;
        --max-len) MAX_LEN="$2" ;;
        --ratio) RATIO="$2" ;;
        --ratio-slack) RATIO_SLACK="$2" ;;
        --max-chars) MAX_CHARS="$2" ;;
    esac
    shift 2
done
for opt in SRC TGT TRAIN VALID TEST OUT; do
    [[ -n "${!opt}" ]] || { usage >&2; die "missing --$(echo "$opt" | tr 'A-Z' 'a-z')"; }
done
[[ "$SRC" != "$TGT" ]] || die "--src and --tgt must differ"
for opt in BPE_SIZE WORKERS MIN_LEN MAX_LEN MAX_CHARS; do
    [[ "${!opt}" =~ ^[0-9]+$ ]] \
        || die "--$(echo "$opt" | tr 'A-Z_' 'a-z-') needs a whole number (got '${!opt}')"
done
(( 10#$WORKERS >= 1 )) || die "--workers needs a whole number of at least 1 (got '$WORKERS'): the fairseq-preprocess worker processes"
# sentencepiece needs a piece for <unk>, one for the word-start mark and one for each
# character of the text: fewer than 3 can never train
(( 10#$BPE_SIZE >= 3 )) || die "--bpe-size needs a whole number of at least 3 (got '$BPE_SIZE'): the sentencepiece vocabulary holds <unk>, the word-start mark and every character of the text (usual sizes: 8000 to 32000)"
if ! [[ "$RATIO" =~ ^[0-9]+([.][0-9]+)?$ ]] || ! awk -v r="$RATIO" 'BEGIN { exit !(r >= 1) }'; then
    die "--ratio needs a number of at least 1 (got '$RATIO'); --no-ratio-filter turns the rule off"
fi
# the filters of the training text: before BPE only what is safe for any language
# (empty sides, absurd lengths in characters); lengths and ratio on subword pieces
PRE_FILTER=(--filter --min-len 1 --max-len 0 --max-chars "$MAX_CHARS" --no-ratio-filter)
PIECE_FILTER=(--filter --min-len "$MIN_LEN" --max-len "$MAX_LEN" --ratio "$RATIO")
if [[ -n "$RATIO_SLACK" ]]; then
    [[ "$RATIO_SLACK" =~ ^[0-9]+$ ]] || die "--ratio-slack needs a whole number (got '$RATIO_SLACK')"
    PIECE_FILTER+=(--ratio-slack "$RATIO_SLACK")
fi
case $RATIO_MODE in
    off) PIECE_FILTER+=(--no-ratio-filter) ;;
    absolute) PIECE_FILTER+=(--absolute-ratio) ;;
esac

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
    filter=() outputs=("$out_src" "$out_tgt")
    [[ $split == train ]] && filter=("${PRE_FILTER[@]}")
    # (the signature names no output: signature() hashes an existing file's mtime)
    sig="$(signature v2 "${filter[@]}" "$in_src" "$in_tgt")"
    if [[ $split == train ]]; then
        filter+=(--line-ids-out "$RAW/train.kept-lines")
        outputs+=("$RAW/train.kept-lines")
    fi
    if step_is_done "$STAMPS" "text.$split" "$sig" "${outputs[@]}"; then
        log "step text/$split: reusing $out_src, $out_tgt (inputs unchanged)"
        continue
    fi
    if [[ $split == train ]]; then
        log "step text/$split: cleaning $in_src + $in_tgt (drop pairs with an empty side or a side over $MAX_CHARS characters)"
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
        --vocab-size "$BPE_SIZE" "$RAW/train.$SRC" "$RAW/train.$TGT" \
        || die "step bpe-train failed (see the message above); 'Vocabulary size is smaller than required_chars. N vs M' means that the training text needs M pieces (<unk>, the word-start mark and its characters) and --bpe-size $BPE_SIZE is fewer: raise --bpe-size to at least M"
    step_done "$STAMPS" spm-train "$sig"
fi

# --- 4. encode all splits (train before its piece filters) ------------------------------
ins=() outs=()
for split in train valid test; do
    name=$split
    [[ $split == train ]] && name=train.unfiltered
    for lang in "$SRC" "$TGT"; do ins+=("$RAW/$split.$lang"); outs+=("$SPM/$name.$lang"); done
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

# --- 5. length and ratio filters of the training pairs, on subword pieces -----------------
# (fairseq's WMT recipe cleans the BPE output too: a ratio of pieces means the same for
# languages segmented differently, where a ratio of words does not)
sig="$(signature v2 "${PIECE_FILTER[@]}" "$SPM/train.unfiltered.$SRC" "$SPM/train.unfiltered.$TGT" \
    "$RAW/train.kept-lines")"
if step_is_done "$STAMPS" piece-filter "$sig" "$SPM/train.$SRC" "$SPM/train.$TGT" "$OUT/train.kept-lines"; then
    log "step piece-filter: reusing $SPM/train.{$SRC,$TGT} (inputs unchanged)"
else
    case $RATIO_MODE in
        off) rule="no ratio rule" ;;
        absolute) rule="piece ratio <= $RATIO" ;;
        *) rule="piece ratio within a factor $RATIO of the corpus median (and ${RATIO_SLACK:-2} pieces)" ;;
    esac
    log "step piece-filter: keeping training pairs of $MIN_LEN-$MAX_LEN pieces a side, $rule"
    step_reset "$STAMPS" piece-filter
    "$PYTHON" "$REPO_ROOT/scripts/clean_corpus.py" --in-src "$SPM/train.unfiltered.$SRC" \
        --in-tgt "$SPM/train.unfiltered.$TGT" --out-src "$SPM/train.$SRC" --out-tgt "$SPM/train.$TGT" \
        "${PIECE_FILTER[@]}" --line-ids-in "$RAW/train.kept-lines" \
        --line-ids-out "$OUT/train.kept-lines" \
        || die "step piece-filter failed (see the message above)"
    [[ -s "$SPM/train.$SRC" ]] || die "no training pairs left after the piece filters; relax them (--max-len, --ratio, --no-ratio-filter)"
    step_done "$STAMPS" piece-filter "$sig"
fi

# --- 6. fairseq-preprocess --------------------------------------------------------------
PAIR="$SRC-$TGT"
bin_outs=("$OUT/dict.$SRC.txt" "$OUT/dict.$TGT.txt")
for split in train valid test; do
    for lang in "$SRC" "$TGT"; do
        bin_outs+=("$OUT/$split.$PAIR.$lang.bin" "$OUT/$split.$PAIR.$lang.idx")
    done
done
bin_ins=()
for split in train valid test; do
    for lang in "$SRC" "$TGT"; do bin_ins+=("$SPM/$split.$lang"); done
done
sig="$(signature v1 "$WORKERS" "${bin_ins[@]}")"
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

# --- 7. AutoAssist features of the training set -------------------------------------------
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
