#!/usr/bin/env python
"""Approximate reducible-loss densities of diagnosis files written before autoassist-diagnose
reported the reducible loss (their shares are of the raw, label-smoothed loss).

    python -m research.reducible_from_raw docs/results/*/diagnosis*.json [--floor NATS]

With the floor F (nats a token) and the mean loss L, a raw share r of the loss at token
share s is r L = s F + s' (L - F), so the reducible share is s' = (r L - s F) / (L - F).
These files hold only the mean over *pairs* of the per-pair mean loss, not the
token-weighted mean, so the figures are approximate: diagnose the checkpoint again for the
exact ones. Files that hold both (written since) get a second table: the approximation
beside the exact density, which measures its bias. The default floor is
losses.label_smoothing_floor(0.1, 7824), Multi30k's (Tatoeba's 7,960 types give 1.2232,
0.002 more).
"""

import json

from autoassist_fairseq.losses import label_smoothing_floor
from research.bench import doc_parser


def reducible_share(raw_share, token_share, mean_loss, floor):
    """The reducible-loss share that a raw-loss share *raw_share* at *token_share* implies."""
    return (raw_share * mean_loss - token_share * floor) / (mean_loss - floor)


def main():
    p = doc_parser(__doc__, 1)
    p.add_argument("diagnoses", nargs="+", help="diagnosis JSON files (raw-loss shares)")
    p.add_argument("--floor", type=float, default=label_smoothing_floor(0.1, 7824),
                   help="the loss floor in nats (default: label smoothing 0.1, 7,824 types)")
    a = p.parse_args()
    print("| file | mean loss (nats) | oracle density at 35%: raw / reducible | Assistant's "
          "token share | its density: raw / reducible |\n|---|---|---|---|---|")
    checks = []
    for path in a.diagnoses:
        with open(path) as f:
            d = json.load(f)
        for entry in d.get("diagnoses", [d]):  # one checkpoint, or an oracle curve's several
            if "oracle_skipped_share_raw_loss_at_35pct_tokens" in entry:
                checks.append((path, entry))
        if "skipped_share_loss" not in d:
            continue  # written with the reducible loss already
        mean, share = d["mean_loss"], d["skipped_share_tokens"]
        oracle = d.get("oracle_skipped_share_loss_at_35pct_tokens")
        o_raw, o_red = ("n/a", "n/a") if oracle is None else (
            f"{oracle / 0.35:.2f}", f"{reducible_share(oracle, 0.35, mean, a.floor) / 0.35:.2f}")
        print(f"| {path} | {mean:.2f} | {o_raw} / {o_red} | {share:.2f} | "
              f"{d['skipped_share_loss'] / share:.2f} / "
              f"{reducible_share(d['skipped_share_loss'], share, mean, a.floor) / share:.2f} |")

    if checks:
        print("\n| file | passes | oracle density at 35%, reducible: from the pair mean / exact "
              "|\n|---|---|---|")
        for path, d in checks:
            raw = d["oracle_skipped_share_raw_loss_at_35pct_tokens"]
            approx = reducible_share(raw, 0.35, d["mean_loss"], d["loss_floor"]) / 0.35
            exact = d["oracle_skipped_share_reducible_loss_at_35pct_tokens"] / 0.35
            print(f"| {path} | {d.get('passes', 0):.1f} | {approx:.3f} / {exact:.3f} |")


if __name__ == "__main__":
    main()
