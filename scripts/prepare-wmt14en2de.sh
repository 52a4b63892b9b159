#!/usr/bin/env bash
# WMT14 English-German, the standard setup (train: Europarl v7 + Common Crawl + News
# Commentary v9; valid: newstest2013; test: newstest2014 "full", 3003 sentences),
# prepared for AutoAssist training with fairseq.
#
# Difference from fairseq's examples/translation/prepare-wmt14en2de.sh (--icml17):
# fairseq normalises punctuation, Moses-tokenises, learns a 40k joint subword-nmt BPE
# and cleans after BPE; it also splits its valid set off the training data. Here the
# raw text goes straight into a joint sentencepiece BPE (32k by default, no Moses
# tokenisation, so hypotheses come out detokenised for sacreBLEU), the cleaning
# (1-250 pieces, ratio 1.5 around the corpus median, about 1 for en-de) is applied to
# the BPE pieces as in fairseq, and newstest2013 is the valid set. The downloads are the
# same statmt.org archives.
set -euo pipefail

_LOG_TAG=prepare-wmt14en2de
# shellcheck source=scripts/_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"

# archive -> URL (as in fairseq's prepare-wmt14en2de.sh --icml17)
declare -A URL=(
    [training-parallel-europarl-v7.tgz]="http://statmt.org/wmt13/training-parallel-europarl-v7.tgz"
    [training-parallel-commoncrawl.tgz]="http://statmt.org/wmt13/training-parallel-commoncrawl.tgz"
    [training-parallel-nc-v9.tgz]="http://statmt.org/wmt14/training-parallel-nc-v9.tgz"
    [dev.tgz]="http://data.statmt.org/wmt17/translation-task/dev.tgz"
    [test-full.tgz]="http://statmt.org/wmt14/test-full.tgz"
)
# training corpus (file name prefix inside the archive) -> archive
TRAIN_CORPORA=(europarl-v7.de-en commoncrawl.de-en news-commentary-v9.de-en)
declare -A ARCHIVE_OF=(
    [europarl-v7.de-en]=training-parallel-europarl-v7.tgz
    [commoncrawl.de-en]=training-parallel-commoncrawl.tgz
    [news-commentary-v9.de-en]=training-parallel-nc-v9.tgz
    [newstest2013]=dev.tgz
    [newstest2014]=test-full.tgz
)

usage() {
    cat <<EOF
Usage: $(basename "$0") [--raw-dir DIR] [--out DIR] [--bpe-size 32000]
                   [--train-prefix PREFIX]... [--no-download] [--workers N]
                   [prepare-corpus.sh filter options]

Prepares WMT14 en-de (train: Europarl v7, Common Crawl, News Commentary v9; valid:
newstest2013; test: newstest2014 full) with scripts/prepare-corpus.sh: joint
sentencepiece BPE, cleaning of the training pairs on BPE pieces (1-250 pieces a side,
piece ratio within 1.5 of the corpus median), fairseq-preprocess --joined-dictionary,
autoassist-features.

Difference from fairseq's examples/translation/prepare-wmt14en2de.sh --icml17: no Moses
tokenisation and a joint sentencepiece BPE of 32k (default) instead of a 40k joint
subword-nmt BPE after Moses tokenisation; newstest2013 is the valid set (fairseq takes
every 100th training pair); the test set is detokenised newstest2014 (sacreBLEU). The
downloads are the same statmt.org archives.

  --raw-dir DIR      where the raw files are looked for and downloaded to
                     (default: $REPO_ROOT/work/wmt14/raw)
  --out DIR          output data directory (default: $REPO_ROOT/work/wmt14/data)
  --bpe-size N       joint sentencepiece vocabulary (default 32000)
  --train-prefix P   use P.en / P.de (plain or .gz; relative to --raw-dir unless absolute)
                     as training data instead of the three WMT14 corpora; repeatable
  --no-download      never download; stop with the list of missing files
  --workers N        fairseq-preprocess workers (default 2)
  --min-len N, --max-len N, --ratio R, --absolute-ratio, --no-ratio-filter, --max-chars N
                     the training-data filters, passed to prepare-corpus.sh (see
                     prepare-corpus.sh --help; defaults 1, 250, 1.5, off, off, 2000)
  -h, --help         print this help and exit

Files are looked for anywhere below --raw-dir by name, plain or .gz:
  training   europarl-v7.de-en.{en,de}, commoncrawl.de-en.{en,de},
             news-commentary-v9.de-en.{en,de}  (from the training-parallel-*.tgz archives)
  valid      newstest2013.{en,de}, or the SGM files newstest2013-src.en.sgm and
             newstest2013-ref.de.sgm  (dev.tgz)
  test       newstest2014-deen-src.en.sgm and newstest2014-deen-ref.de.sgm (test-full.tgz),
             or newstest2014.{en,de}
SGM files are extracted with fairseq's recipe: grep '<seg id' | sed (strip the tags).
Missing archives are downloaded from statmt.org into --raw-dir and unpacked there.
Without --train-prefix, when the three training corpora are absent and --raw-dir holds
pairs named train*.en / train*.de (plain or .gz), those are used instead.

Example (downloads the WMT14 archives, a few GB, into work/wmt14/raw):
  $(basename "$0") --out work/wmt14/data --bpe-size 32000

Example offline, with the shared sample (/work/shared/data/wmt14-en-de-sample):
  mkdir raw
  for f in newstest2013-src.en newstest2013-ref.de newstest2014-deen-src.en \\
           newstest2014-deen-ref.de; do
      zcat SAMPLE/sgm/\$f.sgm.gz > raw/\$f.sgm; done
  cp SAMPLE/train-sample-tok/train-sample.tok.{en,de}.gz raw/
  $(basename "$0") --raw-dir raw --out data --bpe-size 1000
(the train sample is already Moses-tokenised; it only tests the pipeline.)
EOF
}

RAW_DIR="$REPO_ROOT/work/wmt14/raw" OUT="$REPO_ROOT/work/wmt14/data" BPE_SIZE=32000
TRAIN_PREFIXES=() DOWNLOAD=1 WORKERS=2 FILTER_ARGS=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --raw-dir|--out|--bpe-size|--train-prefix|--workers|--min-len|--max-len|--ratio|--max-chars)
            [[ $# -ge 2 ]] || { usage >&2; die "$1 needs a value"; } ;;
    esac
    case "$1" in
        --raw-dir) RAW_DIR="$2"; shift 2 ;;
        --out) OUT="$2"; shift 2 ;;
        --bpe-size) BPE_SIZE="$2"; shift 2 ;;
        --train-prefix) TRAIN_PREFIXES+=("$2"); shift 2 ;;
        --no-download) DOWNLOAD=0; shift ;;
        --min-len|--max-len|--ratio|--max-chars) FILTER_ARGS+=("$1" "$2"); shift 2 ;;
        --absolute-ratio|--no-ratio-filter) FILTER_ARGS+=("$1"); shift ;;
        --workers) WORKERS="$2"; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; die "unknown argument: $1" ;;
    esac
done
mkdir -p "$RAW_DIR" "$OUT"
RAW_DIR="$(cd "$RAW_DIR" && pwd)" OUT="$(cd "$OUT" && pwd)"
TEXT="$OUT/wmt14-text"   # assembled raw text: the input of prepare-corpus.sh
STAMPS="$OUT/.stamps"
mkdir -p "$TEXT"
log "WMT14 en-de: raw files in $RAW_DIR, output $OUT, joint sentencepiece BPE $BPE_SIZE"

# find_raw NAME: first file below RAW_DIR named NAME or NAME.gz
find_raw() {
    find -L "$RAW_DIR" -path "$OUT" -prune -o -type f \( -name "$1" -o -name "$1.gz" \) -print 2>/dev/null \
        | sort | head -n1
}

download() {  # download ARCHIVE into RAW_DIR and unpack it; returns 1 on failure
    local archive="$1" url="${URL[$1]}"
    if [[ -f "$RAW_DIR/$archive" ]]; then
        log "$archive already in $RAW_DIR"
    else
        [[ $DOWNLOAD == 1 ]] || return 1
        log "downloading $url -> $RAW_DIR/$archive"
        if command -v curl >/dev/null; then
            curl -fL --retry 2 --connect-timeout 20 -o "$RAW_DIR/$archive.part" "$url" || return 1
        elif command -v wget >/dev/null; then
            wget -T 20 -t 2 -O "$RAW_DIR/$archive.part" "$url" || return 1
        else
            log "neither curl nor wget is installed"; return 1
        fi
        mv "$RAW_DIR/$archive.part" "$RAW_DIR/$archive"
    fi
    log "unpacking $archive"
    tar -xzf "$RAW_DIR/$archive" -C "$RAW_DIR"
}

MISSING=()
missing() { MISSING+=("$1"); }

# --- training data -------------------------------------------------------------------
TRAIN_FILES=()   # pairs: en de en de ...
if [[ ${#TRAIN_PREFIXES[@]} -gt 0 ]]; then
    for p in "${TRAIN_PREFIXES[@]}"; do
        [[ "$p" == /* ]] || p="$RAW_DIR/$p"
        en="$(resolve_text "$p.en")" || die "missing input file: $p.en (nor $p.en.gz) given by --train-prefix"
        de="$(resolve_text "$p.de")" || die "missing input file: $p.de (nor $p.de.gz) given by --train-prefix"
        TRAIN_FILES+=("$en" "$de")
    done
else
    have_all=1
    for c in "${TRAIN_CORPORA[@]}"; do
        [[ -n "$(find_raw "$c.en")" && -n "$(find_raw "$c.de")" ]] || have_all=0
    done
    if [[ $have_all == 0 ]]; then
        # a train pair of another name (e.g. the shared sample)?
        declare -A seen_base=()
        while IFS= read -r en; do
            base="${en%.gz}"; base="${base%.en}"
            [[ -z "${seen_base[$base]:-}" ]] || continue  # train.en and train.en.gz: one corpus
            seen_base[$base]=1
            de="$(resolve_text "$base.de")" || continue
            TRAIN_FILES+=("$en" "$de")
        done < <(find -L "$RAW_DIR" -path "$OUT" -prune -o -type f \( -name 'train*.en' -o -name 'train*.en.gz' \) -print | sort)
        if [[ ${#TRAIN_FILES[@]} -gt 0 ]]; then
            log "the WMT14 training corpora are not in $RAW_DIR; using the train pair(s) found there: ${TRAIN_FILES[*]}"
        fi
    fi
    if [[ ${#TRAIN_FILES[@]} -eq 0 ]]; then
        for c in "${TRAIN_CORPORA[@]}"; do
            if [[ -z "$(find_raw "$c.en")" || -z "$(find_raw "$c.de")" ]]; then
                download "${ARCHIVE_OF[$c]}" || { missing "$c.en and $c.de (in ${ARCHIVE_OF[$c]}, ${URL[${ARCHIVE_OF[$c]}]})"; continue; }
            fi
            en="$(find_raw "$c.en")" de="$(find_raw "$c.de")"
            if [[ -z "$en" || -z "$de" ]]; then
                missing "$c.en and $c.de (expected inside ${ARCHIVE_OF[$c]})"; continue
            fi
            TRAIN_FILES+=("$en" "$de")
        done
    fi
fi

# --- valid (newstest2013) and test (newstest2014 full): plain text or SGM ---------------
# find_test SET SGM_SRC SGM_REF: sets FOUND_KIND (plain|sgm) and FOUND_EN / FOUND_DE
find_test() {
    local set="$1" sgm_en="$2" sgm_de="$3"
    FOUND_EN="$(find_raw "$sgm_en")" FOUND_DE="$(find_raw "$sgm_de")" FOUND_KIND=sgm
    [[ -n "$FOUND_EN" && -n "$FOUND_DE" ]] && return 0
    FOUND_EN="$(find_raw "$set.en")" FOUND_DE="$(find_raw "$set.de")" FOUND_KIND=plain
    [[ -n "$FOUND_EN" && -n "$FOUND_DE" ]]
}
declare -A SET_EN SET_DE SET_KIND
for spec in "valid newstest2013 newstest2013-src.en.sgm newstest2013-ref.de.sgm" \
            "test newstest2014 newstest2014-deen-src.en.sgm newstest2014-deen-ref.de.sgm"; do
    read -r split set sgm_en sgm_de <<< "$spec"
    if ! find_test "$set" "$sgm_en" "$sgm_de"; then
        if download "${ARCHIVE_OF[$set]}" && find_test "$set" "$sgm_en" "$sgm_de"; then :; else
            missing "$sgm_en and $sgm_de (or $set.en and $set.de) for the $split set (in ${ARCHIVE_OF[$set]}, ${URL[${ARCHIVE_OF[$set]}]})"
            continue
        fi
    fi
    SET_EN[$split]="$FOUND_EN" SET_DE[$split]="$FOUND_DE" SET_KIND[$split]="$FOUND_KIND"
done

if [[ ${#MISSING[@]} -gt 0 ]]; then
    echo "[$_LOG_TAG] ERROR: missing raw files (offline, download failed or --no-download)." >&2
    echo "Put these files (plain or .gz) anywhere below $RAW_DIR, or the .tgz archive named in" >&2
    echo "brackets directly into $RAW_DIR (it is unpacked there):" >&2
    printf '  - %s\n' "${MISSING[@]}" >&2
    echo "or give your own training data with --train-prefix PREFIX (PREFIX.en, PREFIX.de)." >&2
    exit 1
fi

# --- assemble the raw text for prepare-corpus.sh ---------------------------------------
cat_text() { if [[ "$1" == *.gz ]]; then gzip -dc "$1"; else cat "$1"; fi; }
extract_sgm() {  # fairseq's recipe (without its ’ -> ' rewrite, which precedes Moses tokenisation)
    cat_text "$1" | grep '<seg id' | sed -e 's/<seg id="[0-9]*">\s*//g' | sed -e 's/\s*<\/seg>\s*//g'
}

sig="$(signature v1 "${TRAIN_FILES[@]}")"
if step_is_done "$STAMPS" wmt14-train "$sig" "$TEXT/train.en" "$TEXT/train.de"; then
    log "step train-text: reusing $TEXT/train.{en,de} (inputs unchanged)"
else
    step_reset "$STAMPS" wmt14-train
    : > "$TEXT/train.en.tmp"; : > "$TEXT/train.de.tmp"
    for ((i = 0; i < ${#TRAIN_FILES[@]}; i += 2)); do
        en="${TRAIN_FILES[i]}" de="${TRAIN_FILES[i+1]}"
        n_en="$(cat_text "$en" | wc -l)" n_de="$(cat_text "$de" | wc -l)"
        [[ "$n_en" == "$n_de" ]] || die "line-count mismatch: $en has $n_en lines but $de has $n_de"
        log "step train-text: adding $en + $de ($n_en pairs)"
        cat_text "$en" >> "$TEXT/train.en.tmp"
        cat_text "$de" >> "$TEXT/train.de.tmp"
    done
    mv "$TEXT/train.en.tmp" "$TEXT/train.en"; mv "$TEXT/train.de.tmp" "$TEXT/train.de"
    step_done "$STAMPS" wmt14-train "$sig"
fi

for split in valid test; do
    en="${SET_EN[$split]}" de="${SET_DE[$split]}" kind="${SET_KIND[$split]}"
    sig="$(signature v1 "$kind" "$en" "$de")"
    if step_is_done "$STAMPS" "wmt14-$split" "$sig" "$TEXT/$split.en" "$TEXT/$split.de"; then
        log "step $split-text: reusing $TEXT/$split.{en,de} (inputs unchanged)"
        continue
    fi
    step_reset "$STAMPS" "wmt14-$split"
    if [[ $kind == sgm ]]; then
        log "step $split-text: extracting $en + $de (SGM)"
        extract_sgm "$en" > "$TEXT/$split.en"; extract_sgm "$de" > "$TEXT/$split.de"
    else
        log "step $split-text: copying $en + $de"
        cat_text "$en" > "$TEXT/$split.en"; cat_text "$de" > "$TEXT/$split.de"
    fi
    n_en="$(wc -l < "$TEXT/$split.en")" n_de="$(wc -l < "$TEXT/$split.de")"
    [[ "$n_en" == "$n_de" ]] || die "line-count mismatch: $en gives $n_en sentences but $de gives $n_de"
    step_done "$STAMPS" "wmt14-$split" "$sig"
done

bash "$REPO_ROOT/scripts/prepare-corpus.sh" --src en --tgt de \
    --train "$TEXT/train" --valid "$TEXT/valid" --test "$TEXT/test" \
    --out "$OUT" --bpe-size "$BPE_SIZE" --workers "$WORKERS" "${FILTER_ARGS[@]}"
