"""Where the unrelated check flags a clean corpus: its flag rate by the shorter side's number
of distinct subwords, and the rate a per-pair null would give.

The check's p-value compares a pair's LSI similarity with random pairings of the whole
corpus (:mod:`autoassist_fairseq.checks.unrelated`). This study asks whether its
flags on a clean corpus come from sides too short to carry evidence (then the rate falls with
length) or from the LSI space itself (then long pairs are flagged too), and what a null
conditioned on the pair's own sides would flag: the share of K random targets as similar to
the pair's source, and of K random sources as similar to its target, averaged (the
permutation test of this pair alone; under it a random pairing's p-value stays uniform).

    python -m research.unrelated_by_length CORPUS.tsv --src en --tgt ja [--partners 50] [--out F]

CORPUS.tsv: SOURCE<tab>TARGET a line, fitted and scored whole as ``autoassist-score-pairs``
does (pieces of a joint BPE of ``--bpe-size`` trained on it). Prints one line per length
band; ``--out``: per pair, a line of its p-value, its per-pair null's and its shorter side's
distinct subwords (tab-separated).
"""

import argparse

import numpy as np

from autoassist_fairseq.checks.settings import UNRELATED_P_VALUE, PairCheckSettings
from autoassist_fairseq.checks.unrelated import _similarity, unrelated_apply
from autoassist_fairseq.prepare.text_files import open_text
from autoassist_fairseq.tools.pair_files import read_pairs
from autoassist_fairseq.tools.pair_scorer import PairScorer

BANDS = ((0, 5), (5, 7), (7, 10), (10, 15), (15, None))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus")
    parser.add_argument("--src", required=True)
    parser.add_argument("--tgt", required=True)
    parser.add_argument("--partners", type=int, default=50,
                        help="random partners per side of the per-pair null (default: 50)")
    parser.add_argument("--bpe-size", type=int, default=8000,
                        help="joint BPE pieces, as autoassist-score-pairs (default: 8000)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", help="per pair: p-value, per-pair null's, shorter side")
    args = parser.parse_args(argv)
    with open_text(args.corpus) as lines:
        pairs = list(read_pairs(lines, args.corpus))
    scorer = PairScorer(pairs, args.src, args.tgt, PairCheckSettings(checks=("unrelated",)),
                        bpe_size=args.bpe_size)
    counts = [scorer._side(*scorer._encode_ids([p[i] for p in pairs]), {})[0] for i in (0, 1)]
    lsi = scorer.fitted.lsi
    sides = lsi.sides(*counts)
    n = len(pairs)
    rows = np.arange(n)
    p = unrelated_apply(lsi, sides=sides)
    flagged = p > UNRELATED_P_VALUE
    own = _similarity(sides, lsi.maps, rows, rows)
    rng = np.random.default_rng(args.seed)
    at_least = np.zeros(n)
    for _ in range(args.partners):
        other = (rows + rng.integers(1, n, size=n)) % n
        at_least += _similarity(sides, lsi.maps, rows, other) >= own
        at_least += _similarity(sides, lsi.maps, other, rows) >= own
    per_pair_p = at_least / (2 * args.partners)
    per_pair = per_pair_p > UNRELATED_P_VALUE
    shorter = np.minimum(*(np.diff(c.indptr) for c in counts))
    if args.out:
        with open(args.out, "w") as f:
            f.writelines(f"{a:.5f}\t{b:.5f}\t{c}\n" for a, b, c in zip(p, per_pair_p, shorter))
    print(f"{args.corpus}: {n} pairs, flagged {100 * flagged.mean():.2f}% "
          f"(per-pair null: {100 * per_pair.mean():.2f}%)")
    for low, high in BANDS:
        band = (shorter >= low) & (shorter < (high or np.inf))
        if band.any():
            label = f"{low}-{high - 1}" if high else f"{low}+"
            print(f"  shorter side {label} distinct subwords: "
                  f"{band.sum()} pairs ({100 * band.mean():.1f}%), flagged "
                  f"{100 * flagged[band].mean():.2f}%, per-pair null "
                  f"{100 * per_pair[band].mean():.2f}%")


if __name__ == "__main__":
    main()
