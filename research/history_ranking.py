#!/usr/bin/env python
"""How well a pair's own earlier loss ranks its reducible loss later in training.

    python -m research.history_ranking --losses RUN/oracle/losses-epoch{1,2,3}.npz \\
        --out docs/results/converged/history-ranking-multi30k.json

Reads the per-pair losses that ``autoassist-diagnose --losses-out`` writes for checkpoints of
one run, in training order, and for each consecutive pair of checkpoints (k, k+1) gives the
share of the reducible loss at k+1 that a rule skipping the pairs easiest at k (lowest
reducible loss at k, up to the token share) removes, beside the oracle's share at k+1 (the
pairs easiest at k+1 itself) and the Spearman correlation of the two checkpoints' reducible
losses. A rule that skips by each pair's last-seen loss (the ``learnable`` rule's "learned"
side) can at best reach the first figure; the paper's TF-IDF Assistant predicts the same
ranking from the features instead.
"""

import argparse
import json
import sys

import numpy as np
from scipy.stats import spearmanr

from autoassist_fairseq.diagnose import oracle_skipped_loss, reducible_losses


def read_losses(path):
    """(losses, ntok, floor) of one ``--losses-out`` file, in dataset-id order."""
    try:
        saved = np.load(path)
    except (OSError, ValueError) as err:
        sys.exit(f"error: cannot read {path}: {err}")
    if not {"losses", "ntok", "floor"} <= set(saved.files):
        sys.exit(f"error: {path} is not a losses file of autoassist-diagnose --losses-out")
    ids = saved["ids"] if "ids" in saved.files else np.arange(len(saved["losses"]))
    order = np.argsort(ids)
    return ids[order], saved["losses"][order], saved["ntok"][order], float(saved["floor"])


def history_rows(files, token_share):
    rows = []
    previous = None
    for path in files:
        ids, losses, ntok, floor = read_losses(path)
        red = reducible_losses(losses, floor)
        if previous is not None:
            prev_path, prev_ids, prev_red = previous
            if not np.array_equal(prev_ids, ids):
                sys.exit(f"error: {prev_path} and {path} hold different pairs: diagnose both "
                         "with the same --sample-pairs and seed")
            rows.append({
                "from": prev_path, "to": path, "token_share": token_share,
                "spearman_reducible": float(spearmanr(prev_red, red).statistic),
                "history_skipped_share_reducible": oracle_skipped_loss(
                    red, ntok, token_share, rank_by=prev_red),
                "oracle_skipped_share_reducible": oracle_skipped_loss(red, ntok, token_share),
            })
        previous = (path, ids, red)
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example:\n  python -m research.history_ranking --losses "
               "RUN/oracle/losses-epoch1.npz RUN/oracle/losses-epoch2.npz --out rows.json")
    p.add_argument("--losses", nargs="+", required=True,
                   help="autoassist-diagnose --losses-out files of one run, in training order")
    p.add_argument("--token-share", type=float, default=0.35,
                   help="share of the target tokens skipped (default: 0.35)")
    p.add_argument("--out", help="write the rows to this JSON file")
    args = p.parse_args(argv)
    if len(args.losses) < 2:
        p.error("--losses needs the files of at least two checkpoints")
    rows = history_rows(args.losses, args.token_share)
    for r in rows:
        print(f"{r['from']} -> {r['to']}: spearman {r['spearman_reducible']:.3f}, skipped share "
              f"of the reducible loss: by the earlier loss {r['history_skipped_share_reducible']:.3f}, "
              f"oracle {r['oracle_skipped_share_reducible']:.3f}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
