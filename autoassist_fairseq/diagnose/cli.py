"""``autoassist-diagnose``: can skipping pay on this corpus? A checkpoint's Assistant
scored against its own Boss, and against an oracle that knows every pair's loss.

For every training pair it computes the Boss's per-sentence loss (the measure the
Assistant learns from: mean label-smoothed token loss, here in eval mode, no dropout)
and the Assistant's g and P(accept) from the checkpoint (rank 0). It reports the share
of Boss tokens skipping would save, the share of the *reducible* loss the skipped pairs
hold (for the Assistant, and for an oracle that skips the lowest-loss pairs first), and
a verdict. A checkpoint without an Assistant (plain ``--task translation``) gets the
oracle's figures only; several checkpoints give one row each of an oracle curve.

The reducible loss. Under ``--label-smoothing eps`` no token's loss can go below the
entropy of the smoothed target (losses.label_smoothing_floor: 1.22 nats = 1.76 bits for
eps 0.1 and 7.8k types; the losses here are in nats, as the criterion's); the part above
it is the learning signal a pair has left (its gradient vanishes with it). A pair's
reducible loss is its mean token loss minus that floor (the NLL under ``cross_entropy``,
whose floor is 0). Shares of the raw loss, which count the floor as signal, are reported
too, with ``raw`` in their names. The oracle's order is the same on both (a constant
shift), only its shares differ.

The verdict. Skipping a pair saves its tokens' compute and loses its part of the learning
signal, its summed reducible token loss. Skipping a token share s with *skip density*
d = skipped reducible-loss share / s leaves the kept tokens (1 - d s) / (1 - s) times their
share of the signal: 1 at d = 1 (skipping removes signal in proportion to the compute it
saves), 1 / (1 - s) at d = 0. The rule:

* ``pays``: the oracle's density at ``--reference-share`` of the tokens (default 0.35,
  the token saving AutoAssist aims at) is at most ``--max-density`` (default 0.5: the kept
  65% of the tokens then carry at least 1.27 times their share of the signal), and the
  Assistant itself skips at least 5% of the Boss tokens with a density at most halfway
  between that and 1 (default 0.75: 1.13 times, a margin over what skipping costs
  besides the signal: the Assistant's CPU and the Boss's waits, which the benchmark
  reports, and the skipped pairs' drift up until their next visit);
* ``oracle-only``: the corpus allows it, but this Assistant does not (yet) find the pairs
  (or the checkpoint has none);
* ``no``: even an oracle would remove the signal nearly in proportion to the tokens.

The bound was first set on the raw loss, from Multi30k at epoch 12, where AutoAssist lost
to the baseline at equal tokens with an oracle density of 0.71 (raw). On the raw loss the
floor's share f of the mean loss turns a reducible density d into f + (1 - f) d, so a raw
bound of 0.5 can never be met once the floor holds half the loss (44% of the mean pair
loss at epoch 12, 52% at epoch 30 there): the bound now applies to the reducible loss,
where the same 1.27 keeps its meaning at every point of training (docs/benchmarks.md,
"Can skipping pay here?"; the earlier diagnoses on this scale: docs/results/converged/).

Reports on labelled pairs (the noise share of what the Assistant skips, in
research/noise_report.py) plug in through ``diagnose(..., pair_report=...)``: they see
every scored pair's loss, tokens and expected skips.
"""

import argparse
import json
import os
import sys

from .figures import MAX_DENSITY, REFERENCE_SHARE, curve_row
from .scoring import DiagnosisError, check_checkpoint, check_data, check_output, diagnose


def losses_paths(losses_out, checkpoints):
    """Where --losses-out puts each checkpoint's losses: the path itself for one checkpoint;
    for several, the checkpoint's name before the suffix (losses.checkpoint12.npz), with as
    many of its folders as tell apart checkpoints of one name (losses.run-a.checkpoints.
    checkpoint_last.npz): no checkpoint's losses overwrite another's."""
    if not losses_out or len(checkpoints) == 1:
        return [losses_out] * len(checkpoints)
    paths = [os.path.abspath(c) for c in checkpoints]
    twice = sorted({c for c, p in zip(checkpoints, paths) if paths.count(p) > 1})
    if twice:
        raise DiagnosisError(f"checkpoint {twice[0]} given twice: give each once")
    parts = [[q for q in os.path.splitext(p)[0].split(os.sep) if q][::-1] for p in paths]
    depth = [1] * len(parts)
    whole = [".".join(reversed(q)) for q in parts]  # alike for x/model.pt and x/model.bin
    while True:
        names = [".".join(reversed(q[:d])) for q, d in zip(parts, depth)]
        grow = [i for i, n in enumerate(names) if names.count(n) > 1 and
                depth[i] < len(parts[i]) and whole.count(whole[i]) == 1]
        if not grow:
            break
        for i in grow:
            depth[i] += 1
    # still one name (x/model.pt and x/model.bin): the checkpoint's place in the list added
    names = [f"{n}.{i + 1}" if names.count(n) > 1 else n for i, n in enumerate(names)]
    stem, ext = os.path.splitext(losses_out)
    return [f"{stem}.{name}{ext or '.npz'}" for name in names]


def format_summary(r):
    """The plain-text lines printed after the JSON."""
    lines = []
    if "skipped_share_boss_tokens" in r:
        lines += [f"Boss tokens skipping would save: {r['skipped_share_boss_tokens']:.1%}",
                  f"reducible loss it would remove: Assistant "
                  f"{r['skipped_share_reducible_loss']:.1%} (raw loss "
                  f"{r['skipped_share_raw_loss']:.1%}) at {r['skipped_share_tokens']:.1%} of "
                  f"the target tokens; oracle {r['oracle_skipped_share_reducible_loss']:.1%} at "
                  "the same tokens"]
    lines.append(f"oracle at {r['reference_share']:.0%} of the target tokens: "
                 f"{r['oracle_skipped_share_reducible_loss_at_reference']:.1%} of the reducible "
                 f"loss (raw loss {r['oracle_skipped_share_raw_loss_at_reference']:.1%}; the "
                 f"floor, {r['loss_floor']:.3f} nats a token, holds "
                 f"{r['floor_share_of_loss']:.1%} of the loss)")
    lines.append(f"verdict: {r['verdict']}: {r['verdict_reason']}")
    return "\n".join(lines)


def format_curve(rows):
    """The oracle curve as a plain-text table (several checkpoints)."""
    lines = ["checkpoint | passes | updates | mean loss | reducible | floor share | "
             "oracle reducible share | oracle raw share | density | verdict"]
    for r in rows:
        lines.append(f"{r['checkpoint']} | {r['passes']:.2f} | {r['num_updates']} | "
                     f"{r['mean_loss']:.3f} | {r['mean_reducible_loss']:.3f} | "
                     f"{r['floor_share_of_loss']:.1%} | "
                     f"{r['oracle_skipped_share_reducible_loss_at_reference']:.1%} | "
                     f"{r['oracle_skipped_share_raw_loss_at_reference']:.1%} | "
                     f"{r['skip_density_oracle']:.2f} | {r['verdict']}")
    return "\n".join(lines)


def parse_cli(argv=None):
    p = argparse.ArgumentParser(
        prog="autoassist-diagnose", description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1].split("\n\nReports on labelled")[0] + "\n\nexamples:\n"
        "  autoassist-diagnose --data work/multi30k --checkpoint "
        "OUT/autoassist-s1/checkpoints/checkpoint_last.pt --out diagnosis.json\n"
        "  autoassist-diagnose --data work/multi30k --checkpoint "
        "RUN/checkpoints/checkpoint{3,6,9}.pt --out oracle-curve.json",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True, help="the data directory the run trained on")
    p.add_argument("--checkpoint", required=True, nargs="+",
                   help="a checkpoint of an --task autoassist_translation run (of plain "
                        "--task translation: the oracle only); several: one row each of an "
                        "oracle curve, written as {'curve': rows, 'diagnoses': figures}")
    p.add_argument("--max-tokens", type=int, default=8000,
                   help="tokens per scoring batch (default: 8000)")
    p.add_argument("--sample-pairs", type=int, default=None,
                   help="score only this many training pairs, drawn at random (seed 0: the "
                        "same pairs for every checkpoint), to cut the cost on a large "
                        "corpus (default: every pair)")
    p.add_argument("--out", default=None, help="also write the figures to this JSON file")
    p.add_argument("--losses-out", default=None,
                   help="also save each pair's loss, target tokens and the loss floor (numpy "
                        ".npz; several checkpoints: the checkpoint's name before .npz, with its "
                        "folders where two checkpoints share a name; its folder is made), e.g. "
                        "to replay the Assistant offline with research/replay_assistant.py")
    p.add_argument("--reference-share", type=float, default=REFERENCE_SHARE,
                   help="token share the oracle skips for the verdict (default: 0.35)")
    p.add_argument("--max-density", type=float, default=MAX_DENSITY,
                   help="skipping pays when the oracle's skipped tokens hold at most this "
                        "share of their token share of the reducible loss (default: 0.5)")
    a = p.parse_args(argv)
    if not 0 < a.reference_share < 1:
        p.error(f"--reference-share {a.reference_share}: must be in (0, 1)")
    if not 0 < a.max_density < 1:
        p.error(f"--max-density {a.max_density}: must be in (0, 1)")
    if a.max_tokens < 1:
        p.error(f"--max-tokens {a.max_tokens}: must be >= 1")
    if a.sample_pairs is not None and a.sample_pairs < 100:
        p.error(f"--sample-pairs {a.sample_pairs}: must be >= 100 (fewer give no stable share)")
    return a


def cli_main(argv=None):
    """The ``autoassist-diagnose`` command (returns None: a console script's return value
    becomes its exit status)."""
    a = parse_cli(argv)
    several = len(a.checkpoint) > 1
    try:
        missing = [c for c in a.checkpoint if not os.path.exists(c)]
        if missing:  # before the slow part of the first one
            raise DiagnosisError(f"{', '.join(missing)} not found")
        check_data(a.data)
        losses = losses_paths(a.losses_out, a.checkpoint)
        for c, path in zip(a.checkpoint, losses):
            check_checkpoint(c)
            if path:
                check_output(path if path.endswith(".npz") else path + ".npz", "--losses-out")
        if a.out:
            check_output(a.out, "--out")
        results = [diagnose(a.data, c, a.max_tokens, a.reference_share, a.max_density,
                            path, a.sample_pairs)
                   for c, path in zip(a.checkpoint, losses)]
    except DiagnosisError as err:
        sys.exit(f"autoassist-diagnose: error: {err}")
    if several:
        out = {"data": os.path.abspath(a.data), "curve": [curve_row(r) for r in results],
               "diagnoses": results}
        print(json.dumps(out, indent=1))
        print(format_curve(out["curve"]))
    else:
        out = results[0]
        print(json.dumps(out, indent=1))
        print(format_summary(out))
    if a.out:
        os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
        with open(a.out, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    cli_main()
