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
import logging
import os
import resource
import sys
import time
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
from scipy.stats import spearmanr

logger = logging.getLogger("autoassist_fairseq.diagnose")

REFERENCE_SHARE = 0.35
MAX_DENSITY = 0.5
MIN_SKIP_SHARE = 0.05


class DiagnosisError(RuntimeError):
    """A failure the user can act on; the command prints it without a traceback."""


# -- figures (pure) --------------------------------------------------------------------
def data_pass(saved: dict, iterator_state: dict) -> int:
    """The data pass rank 0's stream was in at the save (the random rule's rate is per
    pass); fairseq's epoch, a batch count that may span two passes, only without a stream."""
    stream = (saved["ranks"][0] or {}).get("stream")
    if stream is not None and int(stream["generator"]["epoch"]) >= 1:
        return int(stream["generator"]["epoch"])
    return int(iterator_state.get("epoch", 1))


def oracle_skipped_loss(losses, ntok, token_share):
    """Share of the summed token loss held by the easiest pairs with *token_share* of the
    tokens."""
    order = np.argsort(losses)
    within = np.cumsum(ntok[order]) <= token_share * ntok.sum()
    token_loss = (losses * ntok)[order]
    return float(token_loss[within].sum() / token_loss.sum())


def reducible_losses(losses, floor):
    """Each pair's mean token loss above *floor* (clipped at 0: in eval mode no token can go
    below the floor, so only float rounding is clipped)."""
    return np.maximum(np.asarray(losses, dtype=np.float64) - floor, 0.0)


def skip_figures(assistant, losses, ntok, floor=0.0, ids=None):
    """g and Algorithm 1's P(accept) of every pair, and what its expected skips in one pass
    hold against the oracle's (the figures of this command and of replay_assistant.py).

    Args:
        assistant (Assistant): the Assistant to score.
        losses (np.ndarray): per-pair mean token loss of the Boss.
        ntok (np.ndarray): per-pair target tokens.
        floor (float, optional): the loss floor (:func:`loss_floor`; default: 0.0).
        ids (np.ndarray, optional): the pairs' dataset ids (default: 0, 1, ...).

    Returns:
        (np.ndarray, np.ndarray, dict): g, P(accept), and the shares of the tokens, of the
        reducible loss and of the raw loss.
    """
    from .assistant.acceptance import accept_probability

    ids = np.arange(len(losses)) if ids is None else np.asarray(ids)
    chunks = [ids[i:i + 16384] for i in range(0, len(ids), 16384)]
    g = np.concatenate([assistant.utility(c) for c in chunks])
    plain_paper = getattr(assistant.hparams, "rule", "paper") == "paper" \
        and getattr(assistant, "suspect", None) is None
    if plain_paper:
        accept = accept_probability(g, assistant.schedule.lam)  # Algorithm 1's, from the same g
    else:  # the other rules' P(accept) depends on more than g (pass, loss history, checks)
        accept = np.concatenate([assistant.accept_probability(c) for c in chunks])
    skip = 1 - accept  # expected skips per pair in one pass
    token_share = float((skip * ntok).sum() / ntok.sum())
    figures = {"spearman_g_loss": float(spearmanr(g, losses).statistic),
               "skipped_share_tokens": token_share}
    for name, values in (("reducible", reducible_losses(losses, floor)), ("raw", losses)):
        token_loss = values * ntok
        figures[f"skipped_share_{name}_loss"] = float((skip * token_loss).sum() / token_loss.sum())
        figures[f"oracle_skipped_share_{name}_loss"] = oracle_skipped_loss(values, ntok,
                                                                           token_share)
    return g, accept, figures


def loss_floor(criterion, tgt_dict):
    """The floor of *criterion*'s token loss (nats): label_smoothed_cross_entropy's
    ``eps`` (its --label-smoothing) over the target vocabulary; 0 for cross_entropy."""
    from .losses import label_smoothing_floor

    return label_smoothing_floor(float(getattr(criterion, "eps", 0.0)), len(tgt_dict))


def density(loss_share, token_share):
    """Skipped loss share / skipped token share (None when nothing is skipped)."""
    return loss_share / token_share if token_share > 0 else None


def verdict(oracle_density, assistant_density, assistant_token_share,
            max_density=MAX_DENSITY, min_skip_share=MIN_SKIP_SHARE):
    """Whether skipping can pay on this corpus (see the module docstring for the rule).

    Args:
        oracle_density (float): the oracle's skip density (reducible loss) at the reference
            token share.
        assistant_density (float or None): the Assistant's skip density at its own share.
        assistant_token_share (float or None): the share of Boss tokens the Assistant skips
            (None: the checkpoint has no Assistant).
        max_density (float, optional): the oracle's largest density that can pay
            (default: 0.5).
        min_skip_share (float, optional): the smallest token share worth skipping
            (default: 0.05).

    Returns:
        (str, str): ``pays``, ``oracle-only`` or ``no``, and a sentence saying why.
    """
    assistant_max = (1 + max_density) / 2
    if oracle_density > max_density:
        return "no", (f"even an oracle skipping the easiest pairs removes {oracle_density:.2f} "
                      f"of their token share of the reducible loss (pays at <= "
                      f"{max_density:.2f}): the pairs have about equally much left to learn, "
                      "skipping cannot pay on this corpus and Boss")
    if assistant_token_share is None:
        return "oracle-only", (f"an oracle could skip with density {oracle_density:.2f}; this "
                               "checkpoint has no Assistant (plain --task translation)")
    if assistant_token_share < min_skip_share:
        return "oracle-only", (f"an oracle could skip with density {oracle_density:.2f}, but "
                               f"this Assistant skips only {assistant_token_share:.1%} of the "
                               f"Boss tokens (< {min_skip_share:.0%}): it has not taken over yet")
    if assistant_density is None or assistant_density > assistant_max:
        return "oracle-only", (f"an oracle could skip with density {oracle_density:.2f}, but the "
                               f"Assistant's skips hold {assistant_density:.2f} of their token "
                               f"share of the reducible loss (pays at <= {assistant_max:.2f}): "
                               "it does not find the easy pairs well enough")
    return "pays", (f"the easiest pairs hold little reducible loss (oracle density "
                    f"{oracle_density:.2f}) and the Assistant finds them (density "
                    f"{assistant_density:.2f} over {assistant_token_share:.1%} of the Boss tokens)")


# -- the Boss's losses -----------------------------------------------------------------
def boss_losses(models, task, criterion, dataset, max_tokens, ids=None):
    """Per-sentence mean token loss and target tokens of every pair of *dataset* (of the
    pairs *ids* only, in that order, if given)."""
    import torch

    from .losses import per_sentence_loss

    model = models[0].eval()
    losses, ntok = np.zeros(len(dataset)), np.zeros(len(dataset))
    order = dataset.ordered_indices()
    if ids is not None:
        order = order[np.isin(order, ids)]
    batches = dataset.batch_by_size(order, max_tokens=max_tokens)
    with torch.no_grad():
        for batch in batches:
            sample = dataset.collater([dataset[int(i)] for i in batch])
            net_output = model(**sample["net_input"])
            token_losses = criterion.compute_loss(model, net_output, sample, reduce=False)[0]
            rows, loss = per_sentence_loss(token_losses, sample, task.tgt_dict.pad())
            losses[rows] = loss
            ntok[rows] = sample["target"].ne(task.tgt_dict.pad()).sum(1).numpy()
    return (losses, ntok) if ids is None else (losses[ids], ntok[ids])


def _machine_busy_seconds():
    """CPU seconds all processes of this machine used since boot (None off Linux)."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except OSError:
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def checkpoint_position(state, dataset, cfg):
    """Updates and data passes a checkpoint had trained: fairseq's saved epoch in progress
    and batch offset, the offset over the epoch's batches (fairseq's batching with the
    run's --max-tokens, --batch-size and --required-batch-size-multiple, without its length
    filter: exact at epoch ends)."""
    itr = (state.get("extra_state") or {}).get("train_iterator") or {}
    history = state.get("optimizer_history") or [{}]
    offset = int(itr.get("iterations_in_epoch") or 0)
    passes = float(itr.get("epoch", 1)) - 1
    if offset:
        batches = dataset.batch_by_size(
            dataset.ordered_indices(), max_tokens=cfg.max_tokens, max_sentences=cfg.batch_size,
            required_batch_size_multiple=cfg.required_batch_size_multiple)
        passes += offset / len(batches)
    return {"num_updates": history[-1].get("num_updates"), "passes": passes}


def oracle_figures(losses, ntok, floor, reference_share):
    """The oracle's shares of the reducible and the raw loss at the reference token share
    and at 35% of the tokens, with the floor's share of the loss."""
    reducible = reducible_losses(losses, floor)
    figures = {"loss_floor": floor, "mean_loss": float(losses.mean()),
               "mean_reducible_loss": float(reducible.mean()),
               "floor_share_of_loss": float(floor * ntok.sum() / (losses * ntok).sum())}
    for name, values in (("reducible", reducible), ("raw", losses)):
        at_ref = oracle_skipped_loss(values, ntok, reference_share)
        figures[f"oracle_skipped_share_{name}_loss_at_reference"] = at_ref
        figures[f"oracle_skipped_share_{name}_loss_at_35pct_tokens"] = \
            oracle_skipped_loss(values, ntok, 0.35)
        suffix = "" if name == "reducible" else "_raw_loss"
        figures["skip_density_oracle" + suffix] = density(at_ref, reference_share)
        figures[f"kept_{name}_loss_ratio_oracle"] = (1 - at_ref) / (1 - reference_share)
    return figures


@dataclass
class ScoredPairs:
    """Every scored pair of one diagnosis, for a ``pair_report``: corpus ids, the Boss's
    per-sentence losses (nats) and target tokens, source + target tokens, expected skips in
    one pass (1 - P(accept); zeros without an Assistant), and the loss floor."""

    ids: np.ndarray
    losses: np.ndarray
    ntok: np.ndarray
    boss_tokens: np.ndarray
    skip: np.ndarray
    floor: float
    task: Any                 # the checkpoint's fairseq task (its features, when AutoAssist)
    has_assistant: bool


def diagnose(data, checkpoint, max_tokens=8000, reference_share=REFERENCE_SHARE,
             max_density=MAX_DENSITY, losses_out=None, sample_pairs=None,
             pair_report: Optional[Any] = None):
    """The figures and verdict of one checkpoint (see the module docstring).

    Args:
        data (str): the data directory the run trained on.
        checkpoint (str): a checkpoint of an ``autoassist_translation`` run (or of plain
            ``translation``: the oracle's figures only).
        max_tokens (int, optional): tokens per scoring batch (default: 8000).
        reference_share (float, optional): token share the oracle skips for the verdict
            (default: 0.35).
        max_density (float, optional): the verdict's oracle density bound (default: 0.5).
        losses_out (str, optional): save each pair's loss, target tokens and the loss
            floor (.npz).
        sample_pairs (int, optional): score only this many pairs drawn at random (seed 0)
            instead of every pair (default: None, every pair).
        pair_report (optional): an object with ``check(data, subset, num_pairs)``, called
            before the slow part (it raises DiagnosisError on bad input), and
            ``report(result, pairs)``, called with the figures and the ScoredPairs to add
            its own (default: None).

    Returns:
        dict: the figures, as written by ``--out``.
    """
    start = (time.monotonic(), _machine_busy_seconds(), resource.getrusage(resource.RUSAGE_SELF))
    for path in (data, checkpoint):
        if not os.path.exists(path):
            raise DiagnosisError(f"{path} not found")
    import torch
    from fairseq import checkpoint_utils

    from . import compat  # noqa: F401  (torch >= 2.6 loads fairseq checkpoints)
    from .assistant import Assistant
    from .data.arrays import tensors_to_arrays

    torch.set_num_threads(max(1, os.cpu_count() or 1))
    overrides = {"data": os.path.abspath(data)}
    state = checkpoint_utils.load_checkpoint_to_cpu(checkpoint, overrides)
    saved = (state.get("extra_state") or {}).get("train_iterator", {}).get("autoassist")
    has_assistant = bool(saved and saved.get("ranks") and saved["ranks"][0] is not None)
    if not has_assistant:
        logger.info(f"{checkpoint} holds no Assistant state (plain --task translation?): "
                    "the oracle's figures only")
    models, cfg, task = checkpoint_utils.load_model_ensemble_and_task(
        [checkpoint], arg_overrides=overrides, state=state)
    subset = cfg.dataset.train_subset
    task.load_dataset(subset)
    dataset = task.datasets[subset]
    if pair_report is not None:
        pair_report.check(data, subset, len(dataset))  # fail before the slow part
    ids = np.arange(len(dataset))
    if sample_pairs and sample_pairs < len(dataset):  # the same pairs for every checkpoint
        ids = np.sort(np.random.default_rng(0).choice(len(dataset), sample_pairs, replace=False))
    criterion = task.build_criterion(cfg.criterion)
    floor = loss_floor(criterion, task.target_dictionary)
    losses, ntok = boss_losses(models, task, criterion, dataset, max_tokens,
                               None if len(ids) == len(dataset) else ids)
    if losses_out:
        np.savez(losses_out, losses=losses, ntok=ntok, floor=floor, ids=ids)
    reducible = reducible_losses(losses, floor)
    boss_tokens = (dataset.src_sizes[ids] + dataset.tgt_sizes[ids]).astype(np.float64)
    oracle = oracle_figures(losses, ntok, floor, reference_share)
    result = {"checkpoint": os.path.abspath(checkpoint), "pairs": len(losses),
              "pairs_in_corpus": len(dataset),
              **checkpoint_position(state, dataset, cfg.dataset),
              "reference_share": reference_share, **oracle, "max_density": max_density}
    skip = np.zeros(len(losses))
    saved_share = d_assistant = None
    if has_assistant:
        # the task opened (and checked) the features with the train split, and decided on
        # the pair checks as in training
        assistant = Assistant(task.features, task.hparams, task.suspect)
        assistant.load_state_dict(tensors_to_arrays(saved["ranks"][0]["assistant"]))
        # the random rule's rate is that of the saved generator's data pass
        assistant.begin_pass(data_pass(saved, state["extra_state"]["train_iterator"]))
        g, accept, shares = skip_figures(assistant, losses, ntok, floor, ids)
        skip = 1 - accept
        stats = assistant.stats
        # hard: above T_k, an average of the raw losses (the same labels as on the reducible
        # loss, minus the floor on both sides)
        hard = losses > stats["threshold"]
        pair_loss = {"reducible": reducible * ntok, "raw": losses * ntok}
        quintiles = [{"accept_mean": float(accept[q].mean()), "loss_mean": float(losses[q].mean()),
                      "reducible_loss_mean": float(reducible[q].mean()),
                      "hard_share": float(hard[q].mean()),
                      "token_share": float(ntok[q].sum() / ntok.sum()),
                      **{f"{k}_loss_share": float(v[q].sum() / v.sum())
                         for k, v in pair_loss.items()}}
                     for q in np.array_split(np.argsort(accept), 5)]
        saved_share = float((skip * boss_tokens).sum() / boss_tokens.sum())
        d_assistant = density(shares["skipped_share_reducible_loss"],
                              shares["skipped_share_tokens"])
        result.update({
            "threshold": stats["threshold"], "lambda": stats["lambda"],
            "logged_accuracy": stats["accuracy"],
            "accuracy_vs_threshold": float(((g > 0.5) == hard).mean()),
            "majority_share": float(max(hard.mean(), 1 - hard.mean())),
            **shares, "skipped_share_pairs": float(skip.mean()),
            "by_accept_quintile": quintiles, "skipped_share_boss_tokens": saved_share,
            "skip_density_assistant": d_assistant,
            "skip_density_assistant_raw_loss": density(shares["skipped_share_raw_loss"],
                                                       shares["skipped_share_tokens"])})
    code, why = verdict(oracle["skip_density_oracle"], d_assistant, saved_share, max_density)
    result.update({"verdict": code, "verdict_reason": why})
    if pair_report is not None:
        pair_report.report(result, ScoredPairs(ids, losses, ntok, boss_tokens, skip, floor,
                                               task, has_assistant))
    end = (time.monotonic(), _machine_busy_seconds(), resource.getrusage(resource.RUSAGE_SELF))
    cpu = sum(getattr(end[2], k) - getattr(start[2], k) for k in ("ru_utime", "ru_stime"))
    wall = end[0] - start[0]
    result["cost"] = {"wall_s": wall, "cpu_s": cpu, "cores": os.cpu_count(),
                      "other_cpu_share": None if start[1] is None else
                      max(0.0, end[1] - start[1] - cpu) / (wall * (os.cpu_count() or 1))}
    return result


# the columns of the oracle curve (one row per checkpoint)
CURVE_KEYS = ("passes", "num_updates", "mean_loss", "mean_reducible_loss",
              "floor_share_of_loss", "oracle_skipped_share_reducible_loss_at_reference",
              "oracle_skipped_share_raw_loss_at_reference", "skip_density_oracle",
              "skip_density_oracle_raw_loss", "verdict")


def curve_row(result):
    """One checkpoint's row of the oracle curve."""
    return {"checkpoint": os.path.basename(result["checkpoint"]),
            **{k: result.get(k) for k in CURVE_KEYS}}


def losses_path(losses_out, checkpoint, several):
    """Where --losses-out puts a checkpoint's losses: the path itself for one checkpoint;
    for several, the checkpoint's name before the suffix (losses.checkpoint12.npz)."""
    if not losses_out or not several:
        return losses_out
    stem, ext = os.path.splitext(losses_out)
    return f"{stem}.{os.path.splitext(os.path.basename(checkpoint))[0]}{ext or '.npz'}"


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
                        ".npz; several checkpoints: the checkpoint's name before .npz), e.g. "
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
        results = [diagnose(a.data, c, a.max_tokens, a.reference_share, a.max_density,
                            losses_path(a.losses_out, c, several), a.sample_pairs)
                   for c in a.checkpoint]
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
