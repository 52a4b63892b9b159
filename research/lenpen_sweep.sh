#!/usr/bin/env bash
# BLEU of one checkpoint at several length penalties, on the valid and the test split: whether
# a BLEU difference between two runs is one of output length (the brevity penalty) that a
# length penalty chosen on the valid split would also give.
#   bash research/lenpen_sweep.sh DATA CHECKPOINT.pt WORK LENPEN [LENPEN ...]
# Each (lenpen, split) decodes with scripts/evaluate.sh (beam 4) into WORK/lpX-SPLIT/ (the
# checkpoint linked there, so its own folder is left as it is) and prints sacreBLEU's line.
set -euo pipefail
[[ $# -ge 4 ]] || { sed -n 2,7p "$0" >&2; exit 2; }
DATA="$1"; CKPT="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"; WORK="$3"; shift 3
[[ -f "$CKPT" ]] || { echo "lenpen_sweep: checkpoint $CKPT not found" >&2; exit 2; }
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
for lp in "$@"; do
    for split in valid test; do
        dir="$WORK/lp$lp-$split"
        mkdir -p "$dir" && ln -sf "$CKPT" "$dir/checkpoint_last.pt"
        bash "$REPO_ROOT/scripts/evaluate.sh" "$DATA" "$dir" --subset "$split" --lenpen "$lp" \
            > "$dir/evaluate.log" 2>&1 || { echo "lenpen_sweep: see $dir/evaluate.log" >&2; exit 1; }
        echo "lenpen $lp $split: $(grep '^BLEU' "$dir/evaluate.log")"
    done
done
