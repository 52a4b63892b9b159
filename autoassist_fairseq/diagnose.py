"""``autoassist-diagnose``: can skipping pay on this corpus? A checkpoint's Assistant
scored against its own Boss, and against an oracle that knows every pair's loss.

For every training pair it computes the Boss's per-sentence loss (the measure the
Assistant learns from: mean label-smoothed token loss, here in eval mode, no dropout)
and the Assistant's g and P(accept) from the checkpoint (rank 0). It reports the share
of Boss tokens skipping would save, the share of the loss the skipped pairs hold (for
the Assistant, and for an oracle that skips the lowest-loss pairs first), and a verdict.

The verdict. Skipping a pair saves its tokens' compute and loses its part of the learning
signal, taken here as its summed token loss. It pays only when the skipped tokens hold
clearly less than their share of the loss: the *skip density* = skipped loss share /
skipped token share must be well below 1 (1 = skipping removes signal in proportion to
the compute it saves). On Multi30k, where AutoAssist lost to the baseline at equal tokens,
the oracle's easiest 35% of tokens held 0.71 of their share (24.8% of the loss); the rule
asks for half of that gap or better:

* ``pays``: the oracle's density at ``--reference-share`` of the tokens (default 0.35,
  the token saving AutoAssist aims at) is at most ``--max-density`` (default 0.5: the kept
  65% of the tokens then carry at least 1.27 times their share of the loss), and the
  Assistant itself skips at least 5% of the Boss tokens with a density at most halfway
  between that and 1 (default 0.75);
* ``oracle-only``: the corpus allows it, but this Assistant does not (yet) find the pairs;
* ``no``: even an oracle would remove the signal nearly in proportion to the tokens.

With ``--noise-labels`` (a labels file of scripts/add_noise.py, one line per raw training
pair) and DATA/train.kept-lines (prepare-corpus.sh), it adds the share of noise among the
tokens the Assistant would skip and would train. Loss-based skipping keeps noisy pairs
(their loss stays high): a verdict of ``pays`` then comes with a warning when the trained
tokens hold more noise than the corpus.
"""

import argparse
import json
import logging
import os
import resource
import sys
import time

import numpy as np
from scipy.stats import spearmanr

logger = logging.getLogger("autoassist_fairseq.diagnose")

REFERENCE_SHARE = 0.35
MAX_DENSITY = 0.5
MIN_SKIP_SHARE = 0.05
CLEAN = "clean"


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


def skip_figures(assistant, losses, ntok):
    """g and Algorithm 1's P(accept) of every pair, and what its expected skips in one pass
    hold against the oracle's (the figures of this command and of replay_assistant.py).

    Args:
        assistant (Assistant): the Assistant to score.
        losses (np.ndarray): per-pair mean token loss of the Boss.
        ntok (np.ndarray): per-pair target tokens.

    Returns:
        (np.ndarray, np.ndarray, dict): g, P(accept), and the shares of tokens and loss.
    """
    from .assistant.sampler import accept_probability

    ids = np.arange(len(losses))
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
    token_loss = losses * ntok
    return g, accept, {
        "spearman_g_loss": float(spearmanr(g, losses).statistic),
        "skipped_share_tokens": token_share,
        "skipped_share_loss": float((skip * token_loss).sum() / token_loss.sum()),
        "oracle_skipped_share_loss": oracle_skipped_loss(losses, ntok, token_share)}


def density(loss_share, token_share):
    """Skipped loss share / skipped token share (None when nothing is skipped)."""
    return loss_share / token_share if token_share > 0 else None


def verdict(oracle_density, assistant_density, assistant_token_share,
            max_density=MAX_DENSITY, min_skip_share=MIN_SKIP_SHARE):
    """Whether skipping can pay on this corpus (see the module docstring for the rule).

    Args:
        oracle_density (float): the oracle's skip density at the reference token share.
        assistant_density (float or None): the Assistant's skip density at its own share.
        assistant_token_share (float): the share of Boss tokens the Assistant skips.
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
                      f"of their token share of the loss (pays at <= {max_density:.2f}): the "
                      "pairs are about equally hard, skipping cannot pay on this corpus and Boss")
    if assistant_token_share < min_skip_share:
        return "oracle-only", (f"an oracle could skip with density {oracle_density:.2f}, but "
                               f"this Assistant skips only {assistant_token_share:.1%} of the "
                               f"Boss tokens (< {min_skip_share:.0%}): it has not taken over yet")
    if assistant_density is None or assistant_density > assistant_max:
        return "oracle-only", (f"an oracle could skip with density {oracle_density:.2f}, but the "
                               f"Assistant's skips hold {assistant_density:.2f} of their token "
                               f"share of the loss (pays at <= {assistant_max:.2f}): it does not "
                               "find the easy pairs well enough")
    return "pays", (f"the easiest pairs hold little loss (oracle density {oracle_density:.2f}) "
                    f"and the Assistant finds them (density {assistant_density:.2f} over "
                    f"{assistant_token_share:.1%} of the Boss tokens)")


def noise_shares(noisy, boss_tokens, skip):
    """Share of noisy tokens among the expected skipped, the trained and all Boss tokens.

    Args:
        noisy (np.ndarray of bool): per-pair noise flag.
        boss_tokens (np.ndarray): per-pair source + target tokens.
        skip (np.ndarray): per-pair expected skips in one pass (1 - P(accept)).
    """
    def share(weights):
        total = (weights * boss_tokens).sum()
        return float((weights * boss_tokens * noisy).sum() / total) if total > 0 else None
    return {"corpus": share(np.ones_like(skip)), "skipped": share(skip), "trained": share(1 - skip)}


def noise_by_kind(labels, boss_tokens, skip, losses, flags=None):
    """Per label (``clean`` and each noise kind): pairs, its share of the Boss tokens, the
    share of its own tokens that would be skipped, and its pairs' mean loss. Shows which
    kinds a rule finds: untranslated copies, say, can be learned by copying and then look easy.
    With *flags* (the pair checks' per-pair flags), also the share of its pairs flagged.
    """
    total = boss_tokens.sum()
    kinds = {}
    for kind in np.unique(labels):
        mask = labels == kind
        tokens = boss_tokens[mask].sum()
        kinds[str(kind)] = {
            "pairs": int(mask.sum()),
            "token_share": float(tokens / total) if total > 0 else None,
            "skipped_share": float((skip[mask] * boss_tokens[mask]).sum() / tokens)
            if tokens > 0 else None,
            "mean_loss": float(losses[mask].mean())}
        if flags is not None:
            kinds[str(kind)]["pair_checks_flagged"] = float(flags[mask].mean())
    return kinds


def read_noise_labels(data, subset, labels_path, num_pairs):
    """Per binarised pair, its label in *labels_path*, mapped through DATA/SUBSET.kept-lines."""
    kept_path = os.path.join(data, f"{subset}.kept-lines")
    if not os.path.exists(labels_path):
        raise DiagnosisError(f"--noise-labels {labels_path} not found")
    if not os.path.exists(kept_path):
        raise DiagnosisError(f"{kept_path} not found: it maps the binarised pairs to the raw "
                             "lines the labels follow; rerun scripts/prepare-corpus.sh (it "
                             "writes train.kept-lines) on the noisy corpus")
    with open(labels_path, encoding="utf-8") as f:
        labels = np.array([line.strip() for line in f])
    kept = np.loadtxt(kept_path, dtype=np.int64, ndmin=1)
    if len(kept) != num_pairs:
        raise DiagnosisError(f"{kept_path} has {len(kept)} lines for {num_pairs} binarised "
                             "pairs: rerun scripts/prepare-corpus.sh")
    if len(kept) and kept.max() >= len(labels):
        raise DiagnosisError(f"{kept_path} refers to raw line {kept.max()} but {labels_path} has "
                             f"{len(labels)} lines: are they of the same corpus?")
    return labels[kept]


# -- the Boss's losses -----------------------------------------------------------------
def boss_losses(models, task, criterion, dataset, max_tokens):
    """Per-sentence mean token loss and target tokens of every pair of *dataset*."""
    import torch

    from .losses import per_sentence_loss

    model = models[0].eval()
    losses, ntok = np.zeros(len(dataset)), np.zeros(len(dataset))
    batches = dataset.batch_by_size(dataset.ordered_indices(), max_tokens=max_tokens)
    with torch.no_grad():
        for batch in batches:
            sample = dataset.collater([dataset[int(i)] for i in batch])
            net_output = model(**sample["net_input"])
            token_losses = criterion.compute_loss(model, net_output, sample, reduce=False)[0]
            ids, loss = per_sentence_loss(token_losses, sample, task.tgt_dict.pad())
            losses[ids] = loss
            ntok[ids] = sample["target"].ne(task.tgt_dict.pad()).sum(1).numpy()
    return losses, ntok


def _machine_busy_seconds():
    """CPU seconds all processes of this machine used since boot (None off Linux)."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except OSError:
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def diagnose(data, checkpoint, max_tokens=8000, noise_labels=None,
             reference_share=REFERENCE_SHARE, max_density=MAX_DENSITY, losses_out=None):
    """The figures and verdict of one checkpoint (see the module docstring).

    Args:
        data (str): the data directory the run trained on.
        checkpoint (str): a checkpoint of an ``autoassist_translation`` run.
        max_tokens (int, optional): tokens per scoring batch (default: 8000).
        noise_labels (str, optional): labels file of add_noise.py (default: None).
        reference_share (float, optional): token share the oracle skips for the verdict
            (default: 0.35).
        max_density (float, optional): the verdict's oracle density bound (default: 0.5).
        losses_out (str, optional): save each pair's loss and target tokens (.npz).

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
    from .data.batch_iterator import from_checkpoint
    from .features.pair_checks import flagged

    torch.set_num_threads(max(1, os.cpu_count() or 1))
    overrides = {"data": os.path.abspath(data)}
    state = checkpoint_utils.load_checkpoint_to_cpu(checkpoint, overrides)
    saved = (state.get("extra_state") or {}).get("train_iterator", {}).get("autoassist")
    if not saved or not saved.get("ranks") or saved["ranks"][0] is None:
        raise DiagnosisError(f"{checkpoint} holds no Assistant state (not an --task "
                             "autoassist_translation checkpoint?)")
    models, cfg, task = checkpoint_utils.load_model_ensemble_and_task(
        [checkpoint], arg_overrides=overrides, state=state)
    subset = cfg.dataset.train_subset
    task.load_dataset(subset)
    dataset = task.datasets[subset]
    noise = (read_noise_labels(data, subset, noise_labels, len(dataset))
             if noise_labels else None)  # fail before the slow part
    losses, ntok = boss_losses(models, task, task.build_criterion(cfg.criterion), dataset,
                               max_tokens)
    if losses_out:
        np.savez(losses_out, losses=losses, ntok=ntok)

    # the task opened (and checked) the features with the train split, and decided on the
    # pair checks as in training
    assistant = Assistant(task.features, task.hparams)
    assistant.load_state_dict(from_checkpoint(saved["ranks"][0]["assistant"]))
    assistant.begin_epoch(data_pass(saved, state["extra_state"]["train_iterator"]))
    g, accept, shares = skip_figures(assistant, losses, ntok)
    try:
        checks = task.features.pair_checks()  # reported whether or not the run used them
    except ValueError as err:  # e.g. two columns, from an older autoassist-features
        logger.warning(f"pair checks not reported: {err}")
        checks = None
    flags = None if checks is None else flagged(checks)
    skip = 1 - accept
    boss_tokens = (dataset.src_sizes + dataset.tgt_sizes).astype(np.float64)
    stats = assistant.stats
    hard = losses > stats["threshold"]
    quintiles = [{"accept_mean": float(accept[q].mean()), "loss_mean": float(losses[q].mean()),
                  "hard_share": float(hard[q].mean())}
                 for q in np.array_split(np.argsort(accept), 5)]
    oracle_ref = oracle_skipped_loss(losses, ntok, reference_share)
    saved_share = float((skip * boss_tokens).sum() / boss_tokens.sum())
    d_oracle = density(oracle_ref, reference_share)
    d_assistant = density(shares["skipped_share_loss"], shares["skipped_share_tokens"])
    code, why = verdict(d_oracle, d_assistant, saved_share, max_density)
    result = {
        "checkpoint": os.path.abspath(checkpoint), "pairs": len(losses),
        "threshold": stats["threshold"], "lambda": stats["lambda"],
        "logged_accuracy": stats["accuracy"],
        "accuracy_vs_threshold": float(((g > 0.5) == hard).mean()),
        "majority_share": float(max(hard.mean(), 1 - hard.mean())),
        "spearman_g_loss": shares["spearman_g_loss"],
        "mean_loss": float(losses.mean()),
        "skipped_share_pairs": float(skip.mean()),
        "skipped_share_tokens": shares["skipped_share_tokens"],
        "skipped_share_loss": shares["skipped_share_loss"],
        "by_accept_quintile": quintiles,
        "oracle_skipped_share_loss": shares["oracle_skipped_share_loss"],
        "oracle_skipped_share_loss_at_35pct_tokens": oracle_skipped_loss(losses, ntok, 0.35),
        "skipped_share_boss_tokens": saved_share,
        "reference_share": reference_share,
        "oracle_skipped_share_loss_at_reference": oracle_ref,
        "skip_density_oracle": d_oracle, "skip_density_assistant": d_assistant,
        "kept_loss_ratio_oracle": (1 - oracle_ref) / (1 - reference_share),
        "max_density": max_density, "verdict": code, "verdict_reason": why,
    }
    if noise is not None:
        noisy = noise != CLEAN
        result["noise"] = {"labels": os.path.abspath(noise_labels),
                           "assistant": noise_shares(noisy, boss_tokens, skip),
                           "by_kind_pairs": {str(k): int((noise == k).sum())
                                             for k in np.unique(noise)},
                           "by_kind": noise_by_kind(noise, boss_tokens, skip, losses, flags)}
        oracle_skip = np.zeros(len(losses))
        order = np.argsort(losses)
        oracle_skip[order[np.cumsum(ntok[order]) <= reference_share * ntok.sum()]] = 1
        result["noise"]["oracle_at_reference"] = noise_shares(noisy, boss_tokens, oracle_skip)
        trained, corpus = (result["noise"]["assistant"][k] for k in ("trained", "corpus"))
        if code == "pays" and trained is not None and trained > 1.05 * corpus:
            result["verdict_reason"] += (f"; but the trained tokens hold {trained:.1%} noise "
                                         f"against {corpus:.1%} in the corpus: skipping by loss "
                                         "keeps the noisy pairs")
    end = (time.monotonic(), _machine_busy_seconds(), resource.getrusage(resource.RUSAGE_SELF))
    cpu = sum(getattr(end[2], k) - getattr(start[2], k) for k in ("ru_utime", "ru_stime"))
    wall = end[0] - start[0]
    result["cost"] = {"wall_s": wall, "cpu_s": cpu, "cores": os.cpu_count(),
                      "other_cpu_share": None if start[1] is None else
                      max(0.0, end[1] - start[1] - cpu) / (wall * (os.cpu_count() or 1))}
    return result


def format_summary(r):
    """The plain-text lines printed before the JSON."""
    lines = [f"Boss tokens skipping would save: {r['skipped_share_boss_tokens']:.1%}",
             f"loss it would remove: Assistant {r['skipped_share_loss']:.1%} "
             f"(at {r['skipped_share_tokens']:.1%} of the target tokens); oracle "
             f"{r['oracle_skipped_share_loss']:.1%} at the same tokens, "
             f"{r['oracle_skipped_share_loss_at_reference']:.1%} at {r['reference_share']:.0%}"]
    if "noise" in r:
        n = r["noise"]["assistant"]
        fmt = lambda v: "n/a" if v is None else f"{v:.1%}"  # noqa: E731
        lines.append(f"noise share of tokens: skipped {fmt(n['skipped'])}, trained "
                     f"{fmt(n['trained'])}, corpus {fmt(n['corpus'])}")
        kinds = r["noise"].get("by_kind") or {}
        lines.append("share of each kind's tokens skipped: " + ", ".join(
            f"{k} {fmt(v['skipped_share'])} (loss {v['mean_loss']:.2f})"
            for k, v in kinds.items()))
        if any("pair_checks_flagged" in v for v in kinds.values()):
            lines.append("share of each kind's pairs the pair checks flag: " + ", ".join(
                f"{k} {fmt(v.get('pair_checks_flagged'))}" for k, v in kinds.items()))
    lines.append(f"verdict: {r['verdict']}: {r['verdict_reason']}")
    return "\n".join(lines)


def parse_cli(argv=None):
    p = argparse.ArgumentParser(
        prog="autoassist-diagnose", description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1].split("\n\nWith")[0] + "\n\nexample:\n"
        "  autoassist-diagnose --data work/multi30k --checkpoint "
        "OUT/autoassist-s1/checkpoints/checkpoint_last.pt --out diagnosis.json",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True, help="the data directory the run trained on")
    p.add_argument("--checkpoint", required=True,
                   help="a checkpoint of an --task autoassist_translation run")
    p.add_argument("--max-tokens", type=int, default=8000,
                   help="tokens per scoring batch (default: 8000)")
    p.add_argument("--out", default=None, help="also write the figures to this JSON file")
    p.add_argument("--losses-out", default=None,
                   help="also save each pair's loss and target tokens (numpy .npz), e.g. to "
                        "replay the Assistant offline with scripts/replay_assistant.py")
    p.add_argument("--noise-labels", default=None,
                   help="labels of the raw training pairs (scripts/add_noise.py): adds the "
                        "noise share of the skipped and trained tokens; needs "
                        "DATA/train.kept-lines")
    p.add_argument("--reference-share", type=float, default=REFERENCE_SHARE,
                   help="token share the oracle skips for the verdict (default: 0.35)")
    p.add_argument("--max-density", type=float, default=MAX_DENSITY,
                   help="skipping pays when the oracle's skipped tokens hold at most this "
                        "share of their token share of the loss (default: 0.5)")
    a = p.parse_args(argv)
    if not 0 < a.reference_share < 1:
        p.error(f"--reference-share {a.reference_share}: must be in (0, 1)")
    if not 0 < a.max_density < 1:
        p.error(f"--max-density {a.max_density}: must be in (0, 1)")
    if a.max_tokens < 1:
        p.error(f"--max-tokens {a.max_tokens}: must be >= 1")
    return a


def cli_main(argv=None):
    """The ``autoassist-diagnose`` command (returns None: a console script's return value
    becomes its exit status)."""
    a = parse_cli(argv)
    try:
        result = diagnose(a.data, a.checkpoint, a.max_tokens, a.noise_labels,
                          a.reference_share, a.max_density, a.losses_out)
    except DiagnosisError as err:
        sys.exit(f"autoassist-diagnose: error: {err}")
    print(json.dumps(result, indent=1))
    print(format_summary(result))
    if a.out:
        os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
        with open(a.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    cli_main()
