#!/usr/bin/env bash
# Share of a clean corpus's pairs that the pair checks flag: the union of the default checks,
# then each default check alone (a check's flags do not depend on the others), as
# autoassist-score-pairs flags them (fitted on the corpus itself, when it holds at most
# --fit-pairs pairs). For corpora of other scripts and segmentations, e.g. English-Japanese:
#   bash research/other_script_flags.sh CORPUS.tsv SRC TGT [CHECK_SET ...]
# CORPUS.tsv: SOURCE<tab>TARGET a line (plain or .gz). CHECK_SET: "default" (the union) or a
# comma-separated --pair-checks list (default: default language unrelated digits script
# langid). Prints one line per set: the set, pairs flagged, pairs, percent. $PYTHON (default:
# python) runs the package: `PYTHONPATH=OTHER_CHECKOUT` measures another commit's checks.
set -euo pipefail
[[ $# -ge 3 ]] || { sed -n 2,10p "$0" >&2; exit 2; }
CORPUS="$1"; SRC="$2"; TGT="$3"; shift 3
[[ -f "$CORPUS" ]] || { echo "other_script_flags: $CORPUS not found" >&2; exit 2; }
SETS=("$@")
[[ ${#SETS[@]} -gt 0 ]] || SETS=(default language unrelated digits script langid)
for set in "${SETS[@]}"; do
    args=()
    [[ "$set" == default ]] || args=(--pair-checks "$set")
    "${PYTHON:-python}" -m autoassist_fairseq.tools.score_pairs --src "$SRC" --tgt "$TGT" \
        --quiet "${args[@]}" "$CORPUS" |
        awk -F'\t' -v set="$set" '{s += $NF} END {printf "%s\t%d\t%d\t%.2f%%\n", set, s, NR, 100 * s / NR}'
done
