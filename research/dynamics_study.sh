#!/usr/bin/env bash
# Training dynamics against labelled noise: a corpus with labelled noise is prepared, the
# config's small Boss trains on it with the plugin's defaults (--assistant-sync) for PASSES
# passes, every pass's checkpoint is kept, autoassist-diagnose writes every pair's loss at
# the checkpoints named in LOSS_PASSES, and research.dynamics_report scores the dynamics
# between the first of them and each later one, and those of the training passes' own losses
# up to that checkpoint (the Assistant's record). Finished steps are skipped when rerun.
#
#   bash research/dynamics_study.sh paracrawl WORK [PASSES] [LOSS_PASSES]
#   bash research/dynamics_study.sh multi30k-realistic WORK [PASSES] [LOSS_PASSES]
#   bash research/dynamics_study.sh multi30k-clean WORK [PASSES] [LOSS_PASSES]
#
# paracrawl: the 3,000 labelled ParaCrawl pairs mixed into Tatoeba and newstest 2012-2013
# at a share of 0.1, seed 0 (autoassist-check-report's mix); multi30k-realistic: Multi30k
# with 30% noise of research.add_noise --mix realistic, seed 1; multi30k-clean: Multi30k as
# it is (the labels all "clean": the flag rate on a clean corpus). Reports:
# WORK/report-pFIRST-pK.json. PASSES defaults to 12, LOSS_PASSES to "1 4 8 12".
set -euo pipefail
corpus=${1:?usage: bash research/dynamics_study.sh paracrawl|multi30k-realistic|multi30k-clean WORK [PASSES] [LOSS_PASSES]}
work=${2:?give the work folder}
passes=${3:-12}
loss_passes=(${4:-1 4 8 12})
root="$(cd "$(dirname "$0")/.." && pwd)"
shared="${SHARED_DATA:-$root/../shared/data}"
cd "$root"
source scripts/setup_env.sh >/dev/null
export OMP_NUM_THREADS=1
mkdir -p "$work/mix"
mix="$work/mix/train"
if [ ! -f "$mix.labels" ]; then
    case "$corpus" in
        paracrawl)
            python -m research.dynamics_mix "$shared/paracrawl-en-de-labelled/labelled.tsv.gz" \
                --clean "$shared/tatoeba-de-en/train" "$shared/wmt14-en-de-sample/newstest2012" \
                "$shared/wmt14-en-de-sample/newstest2013" --src en --tgt de --share 0.1 \
                --seed 0 --out "$mix"
            valid="$shared/tatoeba-de-en/valid"; test="$shared/tatoeba-de-en/test" ;;
        multi30k-realistic|multi30k-clean)
            if [ "$corpus" = multi30k-realistic ]; then
                python -m research.add_noise --src en --tgt de \
                    --train "$shared/multi30k-en-de/train" --out "$mix" --share 0.3 \
                    --mix realistic --seed 1 > "$work/mix/counts.json"
            else
                for lang in en de; do zcat "$shared/multi30k-en-de/train.$lang.gz" > "$mix.$lang"; done
                sed 's/.*/clean/' "$mix.en" > "$mix.labels"
            fi ;;
        *) echo "unknown corpus $corpus" >&2; exit 2 ;;
    esac
fi
case "$corpus" in
    paracrawl) valid="$shared/tatoeba-de-en/valid"; test="$shared/tatoeba-de-en/test" ;;
    *) valid="$shared/multi30k-en-de/val"; test="$shared/multi30k-en-de/test_2016_flickr" ;;
esac
nice bash scripts/prepare-corpus.sh --src en --tgt de --train "$mix" --valid "$valid" \
    --test "$test" --out "$work/data" > "$work/prepare.log" 2>&1
# the config's flags, one flag and its value a line; --max-epoch and --keep-last-epochs set here
read -ra args <<< "$(grep -v '^#' configs/multi30k/transformer_small.args \
    | grep -v -- '--max-epoch\|--keep-last-epochs' | tr '\n' ' ')"
ckpt="$work/run/checkpoints"
if [ ! -f "$ckpt/checkpoint$passes.pt" ]; then
    mkdir -p "$work/run"
    nice fairseq-train "$work/data" "${args[@]}" --max-epoch "$passes" \
        --keep-last-epochs "$passes" --assistant-sync --save-dir "$ckpt" >> "$work/run/train.log" 2>&1
fi
mkdir -p "$work/losses"
for p in "${loss_passes[@]}"; do
    if [ ! -f "$work/losses/losses.checkpoint$p.npz" ]; then
        nice autoassist-diagnose --data "$work/data" --checkpoint "$ckpt/checkpoint$p.pt" \
            --losses-out "$work/losses/losses.checkpoint$p.npz" >> "$work/diagnose.log" 2>&1
    fi
done
first=${loss_passes[0]}
for p in "${loss_passes[@]:1}"; do
    python -m research.dynamics_report --data "$work/data" --mix "$mix" \
        --losses "$work/losses/losses.checkpoint$first.npz" "$work/losses/losses.checkpoint$p.npz" \
        --visits-checkpoint "$ckpt/checkpoint$p.pt" \
        --out "$work/report-p$first-p$p.json" | sed "s/^/[passes $first-$p] /"
done
