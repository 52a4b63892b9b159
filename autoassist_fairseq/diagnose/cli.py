"""``autoassist-diagnose``: what to train on this corpus at a fixed budget. The corpus's
estimated noise share gives the verdict; a checkpoint's Assistant, scored against its own
Boss and against an oracle that knows every pair's loss, gives the skip densities beside it.

For every training pair it computes the Boss's per-sentence loss (the measure the
Assistant learns from: mean label-smoothed token loss, here in eval mode, no dropout)
and the Assistant's g and P(accept) from the checkpoint (rank 0). It reports the share
of Boss tokens skipping would save, the share of the *reducible* loss the skipped pairs
hold (for the Assistant, and for an oracle that skips the lowest-loss pairs first), the
share of the training pairs that look like noise, and a verdict. A checkpoint without an
Assistant (plain ``--task translation``) gets the oracle's figures only; several
checkpoints give one row each of an oracle curve.

The reducible loss. Under ``--label-smoothing eps`` no token's loss can go below the
entropy of the smoothed target (losses.label_smoothing_floor: 1.22 nats = 1.76 bits for
eps 0.1 and 7.8k types; the losses here are in nats, as the criterion's); the part above
it is the learning signal a pair has left (its gradient vanishes with it). A pair's
reducible loss is its mean token loss minus that floor (the NLL under ``cross_entropy``,
whose floor is 0). Shares of the raw loss, which count the floor as signal, are reported
too, with ``raw`` in their names. The oracle's order is the same on both (a constant
shift), only its shares differ.

The skip density (information). Skipping a token share s with *skip density* d = skipped
reducible-loss share / s leaves the kept tokens (1 - d s) / (1 - s) times their share of
the signal. The oracle's density at ``--reference-share`` of the tokens
(``skip_density_oracle``) and the Assistant's (``skip_density_assistant``) are reported,
with ``--max-density`` (0.5) as a reference line, but no verdict rests on them: at
convergence, with every arm's learning rate decayed within its own budget, skipping easy
pairs did not beat plain fairseq trained less at oracle densities of 0.28-0.46, not even
by a near-oracle ranking (the ``history`` arm, a pair's last loss, Spearman 0.98-0.999
with its current loss late in training, history-ranking-*.json: 4.367 / BLEU 35.73 at
0.7 B on clean Multi30k against plain fairseq's 4.360 / 36.30), and no skipping rule beat
plain fairseq on a clean corpus.

The noise share. ``noise_share_checks``: the share of the training pairs that the pair
checks of the data directory's feature file flag, as the task and ``autoassist-filter``
decide it (copies, wrong-language and unrelated sides). ``noise_share_dynamics``, with
``--dynamics FIRST LAST`` (the ``--losses-out`` files of an early and a late checkpoint of
a run on this corpus, every pair scored): the share whose loss is high and does not fall,
relative to pairs of the same length (diagnose.dynamics). ``noise_share``: the share
flagged by either, which ``autoassist-filter`` with the same inputs drops. The verdict:

* ``filter``: the noise share is at least 0.19. Skipping pays here through the noise, not
  through easy pairs: run ``autoassist-filter DATA --out FILTERED`` (with ``--dynamics
  FIRST LAST`` where given), then plain fairseq on FILTERED with a schedule fitted to the
  budget (``--user-dir autoassist_fairseq --lr-scheduler rex --max-update BUDGET``). That
  is the noise share the evidence covers; a filter by the dynamics alone was not run at a
  fixed budget.
* ``no``: the noise share is at most 0.01, as on the clean corpora measured: train plain
  fairseq with a schedule fitted to the budget (``--user-dir autoassist_fairseq
  --lr-scheduler rex``).
* ``noise-rule``: between the two (real crawled corpora land here: on human-labelled
  ParaCrawl pairs the checks flag 8% of the valid ones). Train the plugin with
  ``--assistant-rule noise`` (the pairs the checks flag at the acceptance floor) and plain
  fairseq, both at the budget with REX, and compare.
* ``no-estimate``: no feature file with pair checks and no ``--dynamics``.

The evidence of each verdict (diagnose.figures.EVIDENCE) is printed with it and listed
below. The figures: docs/results/converged/README.md and its summary.json (corpus
``multi30k-noisy``, arms ``plain-checked`` and ``default``; corpus ``multi30k``, arms
``history`` and ``plain``), docs/results/noise/summary.json and
docs/results/noise/gpu-h200/summary.json (corpus ``multi30k-realistic``),
docs/benchmarks.md ("Can skipping pay here?").

Reports on labelled pairs (the noise share of what the Assistant skips, in
research/noise_report.py) plug in through ``diagnose(..., pair_report=...)``: they see
every scored pair's loss, tokens and expected skips.
"""

import argparse
import json
import os
import sys
import textwrap

from .figures import EVIDENCE, MAX_DENSITY, REFERENCE_SHARE, curve_row
from .inputs import DiagnosisError, check_checkpoint, check_data, check_dynamics, check_output
from .scoring import diagnose


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
    lines.append(f"skip density: oracle {r['skip_density_oracle']:.2f}"
                 + (f", Assistant {r['skip_density_assistant']:.2f}"
                    if r.get("skip_density_assistant") is not None else "")
                 + " (information: skipping easy pairs did not beat plain fairseq at a fixed "
                 "budget at any density measured)")
    shares = [f"{name} {r[key]:.1%}" for name, key in (
        ("pair checks", "noise_share_checks"), ("training dynamics", "noise_share_dynamics"),
        ("either", "noise_share")) if r.get(key) is not None]
    lines.append("noise share of the training pairs: " + (", ".join(shares) or "no estimate"))
    lines.append(f"verdict: {r['verdict']}: {r['verdict_reason']}")
    if r.get("verdict_command"):
        lines.append(f"run: {r['verdict_command']}")
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
        epilog=__doc__.split("\n\n", 1)[1].split("\n\nReports on labelled")[0] + "\n\n"
        "evidence, per verdict:\n" + "\n".join(
            textwrap.fill(text, 90, initial_indent=f"* {code}: ", subsequent_indent="  ")
            for code, text in EVIDENCE.items()) + "\n\nexamples:\n"
        "  autoassist-diagnose --data work/multi30k --checkpoint "
        "OUT/autoassist-s1/checkpoints/checkpoint_last.pt --out diagnosis.json\n"
        "  autoassist-diagnose --data work/crawl --checkpoint RUN/checkpoints/checkpoint4.pt "
        "--dynamics RUN/losses-epoch1.npz RUN/losses-epoch4.npz\n"
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
    p.add_argument("--dynamics", nargs=2, metavar=("FIRST", "LAST"), default=None,
                   help="also estimate the noise share from training dynamics: the "
                        "--losses-out files of an early and a late checkpoint of a run on "
                        "DATA, every pair scored (pairs whose loss is high and does not fall "
                        "are flagged; the bar is set from the corpus)")
    p.add_argument("--reference-share", type=float, default=REFERENCE_SHARE,
                   help="token share at which the oracle's skip density is reported "
                        "(default: 0.35)")
    p.add_argument("--max-density", type=float, default=MAX_DENSITY,
                   help="the skip density's reference line, reported as max_density "
                        "(information: the verdict rests on the noise share; default: 0.5)")
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
            raise DiagnosisError(f"--checkpoint {', '.join(missing)}: "
                                 f"{'does' if len(missing) == 1 else 'do'} not exist: give "
                                 "checkpoint files that fairseq-train saved, e.g. "
                                 "SAVE_DIR/checkpoint_last.pt")
        check_data(a.data)
        check_dynamics(a.dynamics)
        losses = losses_paths(a.losses_out, a.checkpoint)
        for c, path in zip(a.checkpoint, losses):
            check_checkpoint(c)
            if path:
                check_output(path if path.endswith(".npz") else path + ".npz", "--losses-out")
        if a.out:
            check_output(a.out, "--out")
        results = [diagnose(a.data, c, a.max_tokens, a.reference_share, a.max_density,
                            path, a.sample_pairs, dynamics=a.dynamics)
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
