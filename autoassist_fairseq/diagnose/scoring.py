"""``autoassist-diagnose``'s scoring: load a checkpoint's Boss, task and Assistant, compute
every pair's Boss loss (eval mode) and the Assistant's P(accept), and assemble the figures
(``figures``) and the noise shares (``noise_shares``) into one result. The figures' meaning:
autoassist_fairseq.diagnose.
"""

import logging
import os
import resource
import time
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from .figures import (MAX_DENSITY, REFERENCE_SHARE, data_pass, density, oracle_figures,
                      reducible_losses, skip_figures, verdict)
from .inputs import (DiagnosisError, check_checkpoint, check_data, check_dynamics, check_output,
                     other_dictionary)
from .noise_shares import noise_estimates

logger = logging.getLogger("autoassist_fairseq.diagnose")


def loss_floor(criterion, tgt_dict):
    """The floor of *criterion*'s token loss (nats): label_smoothed_cross_entropy's
    ``eps`` (its --label-smoothing) over the target vocabulary; 0 for cross_entropy."""
    from ..losses import label_smoothing_floor

    return label_smoothing_floor(float(getattr(criterion, "eps", 0.0)), len(tgt_dict))


def boss_losses(models, task, criterion, dataset, max_tokens, ids=None):
    """Per-sentence mean token loss and target tokens of every pair of *dataset* (of the
    pairs *ids* only, in that order, if given)."""
    import torch

    from ..losses import per_sentence_loss

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
    """Updates and data passes a checkpoint had trained. With an AutoAssist stream, the
    passes are rank 0's: its generator's data pass and the share of its shard drawn into
    windows (fairseq's epoch counts batches, and an epoch of skipped pairs is not a pass;
    the few windows prefetched beyond the last update count as drawn, and the shard's size is
    taken before fairseq's length filter). Otherwise fairseq's
    saved epoch in progress and batch offset, the offset over the epoch's batches
    (fairseq's batching with the run's --max-tokens, --batch-size and
    --required-batch-size-multiple, without its length filter: exact at epoch ends)."""
    itr = (state.get("extra_state") or {}).get("train_iterator") or {}
    history = state.get("optimizer_history") or [{}]
    saved = itr.get("autoassist") or {}
    rank0 = (saved.get("ranks") or [None])[0] or {}
    generator = (rank0.get("stream") or {}).get("generator")
    if generator is not None and int(generator["data_pass"]) >= 1:
        shard = -(-len(dataset) // int(saved.get("world_size", 1)))  # indices[rank::world]
        drawn = min(int(generator["next_pair"]) / shard, 1.0)
        return {"num_updates": history[-1].get("num_updates"),
                "passes": int(generator["data_pass"]) - 1 + drawn}
    offset = int(itr.get("iterations_in_epoch") or 0)
    passes = float(itr.get("epoch", 1)) - 1
    if offset:
        batches = dataset.batch_by_size(
            dataset.ordered_indices(), max_tokens=cfg.max_tokens, max_sentences=cfg.batch_size,
            required_batch_size_multiple=cfg.required_batch_size_multiple)
        passes += offset / len(batches)
    return {"num_updates": history[-1].get("num_updates"), "passes": passes}


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
             pair_report: Optional[Any] = None, dynamics=None):
    """The figures and verdict of one checkpoint (diagnose.cli's docstring).

    Args:
        data (str): the data directory the run trained on.
        checkpoint (str): a checkpoint of an ``autoassist_translation`` run (or of plain
            ``translation``: the oracle's figures only).
        max_tokens (int, optional): tokens per scoring batch (default: 8000).
        reference_share (float, optional): token share the oracle skips for the verdict
            (default: 0.35).
        max_density (float, optional): the density figures' reference line, reported as
            ``max_density`` (information: the verdict does not use it; default: 0.5).
        losses_out (str, optional): save each pair's loss, target tokens and the loss
            floor (.npz), and with an Assistant in the checkpoint its P(accept) of each
            pair (``accept``).
        sample_pairs (int, optional): score only this many pairs drawn at random (seed 0)
            instead of every pair (default: None, every pair).
        pair_report (optional): an object with ``check(data, subset, num_pairs)``, called
            before the slow part (it raises DiagnosisError on bad input), and
            ``report(result, pairs)``, called with the figures and the ScoredPairs to add
            its own (default: None).
        dynamics (sequence of two str, optional): the ``--losses-out`` files of an early
            and a late checkpoint of a run on *data*, for the training dynamics' noise share
            (default: None: the pair checks' share alone).

    Returns:
        dict: the figures, as written by ``--out``.
    """
    start = (time.monotonic(), _machine_busy_seconds(), resource.getrusage(resource.RUSAGE_SELF))
    check_data(data)
    check_checkpoint(checkpoint)
    check_dynamics(dynamics)
    if losses_out:
        check_output(losses_out if losses_out.endswith(".npz") else losses_out + ".npz",
                     "--losses-out")
    import torch
    from fairseq import checkpoint_utils

    from .. import register
    from ..assistant import Assistant
    from ..data import schema
    from ..data.arrays import tensors_to_arrays

    # the task the checkpoint names, and compat (torch >= 2.6 loads fairseq's checkpoints):
    # the command imported the package before fairseq, which then registers nothing itself
    register()
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    overrides = {"data": os.path.abspath(data)}
    try:
        state = checkpoint_utils.load_checkpoint_to_cpu(checkpoint, overrides)
    except Exception as err:  # noqa: BLE001  (a file check_checkpoint could not tell)
        raise DiagnosisError(f"--checkpoint {checkpoint} could not be loaded as a fairseq "
                             f"checkpoint ({type(err).__name__}: {err}); give a checkpoint file "
                             "that fairseq-train saved, e.g. SAVE_DIR/checkpoint_last.pt"
                             ) from None
    saved = (state.get("extra_state") or {}).get("train_iterator", {}).get("autoassist")
    if saved is not None:  # before any of it is read: an older layout has other keys
        try:
            saved = schema.load(tensors_to_arrays(saved))
        except schema.CheckpointSchemaError as err:
            raise DiagnosisError(
                f"--checkpoint {checkpoint}: {err.reason}; "
                "autoassist-diagnose reads the AutoAssist state of this release's checkpoints: "
                "diagnose it with the autoassist-fairseq version that wrote it, or give a "
                "checkpoint of a run of this version") from None
    has_assistant = bool(saved and saved.get("ranks") and saved["ranks"][0] is not None)
    if not has_assistant:
        logger.info(f"{checkpoint} holds no Assistant state (plain --task translation?): "
                    "the oracle's figures only")
    try:
        models, cfg, task = checkpoint_utils.load_model_ensemble_and_task(
            [checkpoint], arg_overrides=overrides, state=state)
    except RuntimeError as err:
        if "size mismatch" not in str(err):
            raise
        raise DiagnosisError(other_dictionary(checkpoint, data, state)) from None
    subset = cfg.dataset.train_subset
    task.load_dataset(subset)
    dataset = task.datasets[subset]
    if pair_report is not None:
        pair_report.check(data, subset, len(dataset))  # fail before the slow part
    noise = noise_estimates(data, task.cfg.source_lang, task.cfg.target_lang, len(dataset),
                            dynamics)
    ids = np.arange(len(dataset))
    if sample_pairs and sample_pairs < len(dataset):  # the same pairs for every checkpoint
        ids = np.sort(np.random.default_rng(0).choice(len(dataset), sample_pairs, replace=False))
    criterion = task.build_criterion(cfg.criterion)
    floor = loss_floor(criterion, task.target_dictionary)
    losses, ntok = boss_losses(models, task, criterion, dataset, max_tokens,
                               None if len(ids) == len(dataset) else ids)
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
        assistant.load_state_dict(saved["ranks"][0]["assistant"])  # arrays already
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
    if losses_out:
        os.makedirs(os.path.dirname(os.path.abspath(losses_out)), exist_ok=True)
        # with an Assistant: its P(accept) of each pair at the checkpoint
        np.savez(losses_out, losses=losses, ntok=ntok, floor=floor, ids=ids,
                 **({"accept": 1 - skip} if has_assistant else {}))
    code, why, command = verdict(noise["noise_share_checks"], noise["noise_share_dynamics"],
                                 noise["noise_share"], data=data, dynamics=dynamics)
    result.update({**noise, "verdict": code, "verdict_reason": why, "verdict_command": command})
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
