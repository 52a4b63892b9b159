#!/usr/bin/env python
"""What skipping costs: a checkpoint's Assistant scored against its own Boss.

    python scripts/diagnose_assistant.py --data work/multi30k \\
        --checkpoint OUT/autoassist-s1/checkpoints/checkpoint12.pt [--out FILE.json]

For every training pair it computes the Boss's per-sentence loss, the measure the Assistant
learns from (mean label-smoothed token loss, here in eval mode: no dropout), and the
Assistant's g and P(accept) from the checkpoint's Assistant state (rank 0). It reports
how well g tells loss > T_k, and what the pairs the Assistant expects to skip hold: their
share of pairs, of target tokens and of the summed token loss. Skipping pays only when the
skipped share of the loss is well below the skipped share of the tokens.

It also reports what an oracle Assistant, one that knew every pair's loss, would skip with the
same share of tokens (and with 35%, the issue's goal): the easiest pairs first. That bounds
what any loss-predicting Assistant can gain on this Boss.
"""

import argparse
import json
import os
import sys

import numpy as np
import torch
from scipy.stats import spearmanr

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def boss_losses(models, task, criterion, dataset, max_tokens):
    """Per-sentence mean token loss and target tokens of every pair of *dataset*."""
    from autoassist_fairseq.losses import per_sentence_loss

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


def oracle_skipped_loss(losses, ntok, token_share):
    """Share of the summed token loss held by the easiest pairs with *token_share* of the tokens."""
    order = np.argsort(losses)
    within = np.cumsum(ntok[order]) <= token_share * ntok.sum()
    token_loss = (losses * ntok)[order]
    return float(token_loss[within].sum() / token_loss.sum())


def skip_figures(assistant, losses, ntok):
    """g and Algorithm 1's P(accept) of every pair, and what its expected skips in one pass
    hold against the oracle's: the figures this script and replay_assistant.py both report."""
    from autoassist_fairseq.assistant.sampler import accept_probability

    ids = np.arange(len(losses))
    g = np.concatenate([assistant.utility(ids[i:i + 16384]) for i in range(0, len(ids), 16384)])
    accept = accept_probability(g, assistant.schedule.lam)  # Algorithm 1's, from the same g
    skip = 1 - accept  # expected skips per pair in one pass
    token_share = float((skip * ntok).sum() / ntok.sum())
    token_loss = losses * ntok
    return g, accept, {
        "spearman_g_loss": float(spearmanr(g, losses).statistic),
        "skipped_share_tokens": token_share,
        "skipped_share_loss": float((skip * token_loss).sum() / token_loss.sum()),
        "oracle_skipped_share_loss": oracle_skipped_loss(losses, ntok, token_share)}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, help="the data directory the run trained on")
    p.add_argument("--checkpoint", required=True, help="a checkpoint of an AutoAssist run")
    p.add_argument("--max-tokens", type=int, default=8000)
    p.add_argument("--out", default=None, help="also write the figures to this JSON file")
    p.add_argument("--losses-out", default=None,
                   help="also save each pair's loss and target tokens (numpy .npz), "
                        "e.g. to replay the Assistant offline with other settings")
    a = p.parse_args()
    for path in (a.data, a.checkpoint):
        if not os.path.exists(path):
            sys.exit(f"error: {path} not found")
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    from fairseq import checkpoint_utils, utils

    utils.import_user_module(argparse.Namespace(user_dir=os.path.join(REPO, "autoassist_fairseq")))
    from autoassist_fairseq.assistant import Assistant, AssistantHParams
    from autoassist_fairseq.data.batch_iterator import from_checkpoint

    state = torch.load(a.checkpoint, map_location="cpu", weights_only=False)
    saved = (state.get("extra_state") or {}).get("train_iterator", {}).get("autoassist")
    if not saved or not saved.get("ranks") or saved["ranks"][0] is None:
        sys.exit(f"error: {a.checkpoint} holds no Assistant state (not an "
                 "--task autoassist_translation checkpoint?)")
    models, cfg, task = checkpoint_utils.load_model_ensemble_and_task(
        [a.checkpoint], arg_overrides={"data": os.path.abspath(a.data)})
    task.load_dataset(cfg.dataset.train_subset)
    dataset = task.datasets[cfg.dataset.train_subset]
    criterion = task.build_criterion(cfg.criterion)
    losses, ntok = boss_losses(models, task, criterion, dataset, a.max_tokens)
    if a.losses_out:
        np.savez(a.losses_out, losses=losses, ntok=ntok)

    # the task opened (and checked) the features with the train split
    assistant = Assistant(task.features, AssistantHParams.from_config(cfg.task))
    assistant.load_state_dict(from_checkpoint(saved["ranks"][0]["assistant"]))
    g, accept, shares = skip_figures(assistant, losses, ntok)
    skip = 1 - accept
    stats = assistant.stats
    hard = losses > stats["threshold"]
    order = np.argsort(accept)
    quintiles = [{"accept_mean": float(accept[q].mean()), "loss_mean": float(losses[q].mean()),
                  "hard_share": float(hard[q].mean())} for q in np.array_split(order, 5)]
    result = {
        "checkpoint": os.path.abspath(a.checkpoint), "pairs": len(losses),
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
    }
    print(json.dumps(result, indent=1))
    if a.out:
        os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
        with open(a.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
