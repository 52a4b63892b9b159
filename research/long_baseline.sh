#!/bin/bash
# A long plain-fairseq run for an oracle curve over training: --task translation (as
# research/bench's baseline arm runs it) with the flags of a config's .args file, every
# epoch's checkpoint kept (its --keep-last-epochs, --task, --user-dir, --seed and --max-epoch
# are dropped). Resumable: rerun the same command (fairseq resumes from checkpoint_last.pt).
# Its train.log (OUT/train.log) holds the per-epoch validation losses.
#
#   bash research/long_baseline.sh DATA OUT [CONFIG.args] -- [more fairseq-train flags]
#   bash research/long_baseline.sh work/multi30k work/long/multi30k-baseline-s1 -- \
#       --source-lang en --target-lang de --max-epoch 30 --seed 1
#   bash research/long_baseline.sh work/tatoeba work/long/tatoeba-baseline-s1 -- \
#       --source-lang de --target-lang en --max-epoch 10 --save-interval-updates 210 \
#       --keep-interval-updates -1 --seed 1
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -lt 2 ]; then
    sed -n 2,15p "$0" >&2
    exit 2
fi
data=$1 out=$2
shift 2
config=$REPO/configs/multi30k/transformer_small.args
if [ $# -gt 0 ] && [ "$1" != "--" ]; then config=$1; shift; fi
[ $# -gt 0 ] && [ "$1" = "--" ] && shift
[ -d "$data" ] || { echo "error: $data is not a directory (a prepared corpus)" >&2; exit 2; }
[ -f "$config" ] || { echo "error: config $config not found" >&2; exit 2; }
mkdir -p "$out"
data=$(cd "$data" && pwd) out=$(cd "$out" && pwd)
# shellcheck disable=SC2046  # one flag or value per line of the .args file
flags=$(grep -v '^#' "$config" | grep -v -e '^--user-dir' -e '^--task' -e '^--keep-last-epochs' \
    -e '^--seed' -e '^--max-epoch' | tr '\n' ' ')
cd "$out"
export PYTHONPATH=$REPO${PYTHONPATH:+:$PYTHONPATH}
# shellcheck disable=SC2086
exec python -c "import sys; from fairseq_cli.train import cli_main; import autoassist_fairseq.compat; sys.argv[0] = 'fairseq-train'; cli_main()" \
    "$data" --task translation $flags "$@" --save-dir "$out/checkpoints" >> "$out/train.log" 2>&1
