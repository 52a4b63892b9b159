#!/usr/bin/env python
"""Replay the Assistant offline on a Boss's per-pair losses, to compare its settings cheaply.

    autoassist-diagnose --data work/multi30k \\
        --checkpoint OUT/autoassist-s1/checkpoints/checkpoint12.pt --losses-out losses.npz
    python -m research.replay_assistant --data work/multi30k -s en -t de --losses losses.npz \\
        --set lr=1 --set lr=4 --set lr=4,weight_decay=1e-4

Each ``--set`` (``--assistant-*`` names without the prefix, comma-separated) starts a fresh
Assistant and feeds it loss batches of random pairs, as the Boss would, with the losses held
fixed at the checkpoint's (times log-normal noise, standing in for dropout). It reports how
well g ranks the losses and what Algorithm 1 would skip: the shares of tokens and of loss,
against an oracle that skips the lowest-loss pairs first. It takes seconds where a benchmark
run takes minutes, but the Boss does not learn meanwhile: use it to choose which setting
deserves a benchmark run, not to claim a speed-up.

Several ``--losses`` files (checkpoints of one run, in training order: ``autoassist-diagnose
--checkpoint A B C --losses-out L.npz``) are replayed one data pass each, every pair once in
random order, so that the loss history of the ``learnable`` and ``noise`` rules sees the
Boss's real declines between passes. ``--reducible`` feeds the Assistant each loss minus
the label-smoothing floor saved with it (the noise still acts on the loss the Boss
reports): T_k and the labels 1[loss > T_k] of every rule move with the shift, but the
relative decline of ``--assistant-noise-min-decline`` does not.
"""

import json
import os
import sys
from dataclasses import asdict

import numpy as np

from autoassist_fairseq.assistant import Assistant, AssistantHParams
from autoassist_fairseq.diagnose import skip_figures
from autoassist_fairseq.features.store import FeatureStore, feature_prefix
from autoassist_fairseq.tasks.config import check_hparams
from research.bench import doc_parser


def parse_setting(text):
    """'lr=4,weight_decay=1e-4' -> AssistantHParams, with a clear error for unknown names.

    A text value may hold commas itself: 'rule=random,random_rates=1.0,0.8,lr=4'. The rule
    is the paper's unless set: what this replay measures is g and Algorithm 1."""
    known = AssistantHParams.__dataclass_fields__
    values = {"rule": "paper"}
    name = None
    for item in filter(None, text.split(",")):
        if "=" not in item and name is not None and isinstance(values.get(name), str):
            values[name] += "," + item.strip()  # continues the previous text value
            continue
        name, _, value = item.partition("=")
        name = name.strip().replace("-", "_")
        if name not in known or not value:
            raise SystemExit(f"error: --set {text!r}: expected NAME=VALUE with NAME one of "
                             f"{', '.join(known)}")
        values[name] = type(getattr(AssistantHParams(), name))(value)
    try:
        return check_hparams(AssistantHParams(**values))
    except ValueError as err:
        raise SystemExit(f"error: --set {text!r}: {err}")


def replay(store, snapshots, ntok, floor, hparams, batches, batch_size, noise, seed,
           reducible=False):
    """One fresh Assistant fed loss batches from *snapshots* (per-pair losses, in order;
    one: *batches* random batches; several: one pass each), each loss minus *floor* if
    *reducible*; its figures on the last snapshot, shares of the loss above *floor*."""
    rng = np.random.default_rng(seed)
    assistant = Assistant(store, hparams)
    n = len(ntok)
    for losses in snapshots:
        if len(snapshots) == 1:
            plan = [rng.choice(n, batch_size, replace=False) for _ in range(batches)]
        else:
            order = rng.permutation(n)
            plan = [order[i:i + batch_size] for i in range(0, n, batch_size)]
        for ids in plan:
            noisy = losses[ids] * np.exp(rng.normal(0.0, noise, len(ids)))
            assistant.learn(ids, noisy - floor if reducible else noisy)
    _, _, shares = skip_figures(assistant, snapshots[-1], ntok, floor)
    return {"lambda": assistant.schedule.lam, "accuracy": assistant.schedule.accuracy,
            "chance": assistant.schedule.chance, "threshold": assistant.schedule.threshold,
            "unlearnable_share": assistant.stats["unlearnable"] / n, **shares}


def read_losses(paths, reducible):
    """Per-pair losses of each file, their target tokens and the floor to subtract."""
    snapshots, ntok, floors = [], None, set()
    for path in paths:
        if not os.path.exists(path):
            sys.exit(f"error: {path} not found; write it with autoassist-diagnose --losses-out")
        saved = np.load(path)
        if ntok is not None and not np.array_equal(ntok, saved["ntok"]):
            sys.exit(f"error: {path} is not of the same corpus as {paths[0]}")
        if "ids" in saved and len(saved["ids"]) != len(saved["losses"]) or \
                "ids" in saved and not np.array_equal(saved["ids"], np.arange(len(saved["ids"]))):
            sys.exit(f"error: {path} holds a sample of the pairs (autoassist-diagnose "
                     "--sample-pairs): the replay needs every pair; write it without")
        snapshots.append(saved["losses"])
        ntok = saved["ntok"]
        if reducible and "floor" not in saved:
            sys.exit(f"error: {path} holds no loss floor (written by an older "
                     "autoassist-diagnose): write it again to replay --reducible")
        floors.add(float(saved["floor"]) if "floor" in saved else 0.0)  # old files: raw
    if len(floors) > 1:
        sys.exit(f"error: the --losses files have different loss floors {sorted(floors)}")
    return snapshots, ntok, floors.pop()


def main():
    p = doc_parser(__doc__, 1)
    p.add_argument("--data", required=True, help="the prepared data directory")
    p.add_argument("-s", "--source-lang", required=True, help="source language")
    p.add_argument("-t", "--target-lang", required=True, help="target language")
    p.add_argument("--losses", required=True, nargs="+",
                   help="per-pair losses (.npz from autoassist-diagnose --losses-out); "
                        "several: checkpoints of one run in training order, one pass each")
    p.add_argument("--reducible", action="store_true",
                   help="feed the Assistant the losses minus their label-smoothing floor")
    p.add_argument("--set", action="append", default=None, metavar="NAME=VALUE[,...]",
                   help="one Assistant setting to replay (repeatable; default: the defaults)")
    p.add_argument("--batches", type=int, default=1500,
                   help="loss batches per replay of one --losses file (about 12 epochs of "
                        "the Multi30k config)")
    p.add_argument("--batch-size", type=int, default=220, help="pairs per loss batch")
    p.add_argument("--noise", type=float, default=0.15, help="sd of the log-normal loss noise")
    p.add_argument("--seed", type=int, default=0, help="seed of the replay's draws")
    p.add_argument("--out", default=None, help="also write the results to this JSON file")
    a = p.parse_args()
    snapshots, ntok, floor = read_losses(a.losses, a.reducible)
    store = FeatureStore.open(feature_prefix(a.data, "train", a.source_lang, a.target_lang),
                              num_rows=len(ntok))
    if a.batch_size > len(ntok):
        sys.exit(f"error: --batch-size {a.batch_size} exceeds the {len(ntok)} pairs")
    settings = [(text, parse_setting(text)) for text in a.set or [""]]  # all errors first
    results = []
    for text, hparams in settings:
        result = replay(store, snapshots, ntok, floor, hparams, a.batches, a.batch_size,
                        a.noise, a.seed, a.reducible)
        results.append({"set": text or "defaults", "hparams": asdict(hparams), **result})
        print(f"{text or 'defaults':>30}: " + " ".join(
            f"{k}={v:.3f}" for k, v in result.items()), flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"losses": [os.path.abspath(x) for x in a.losses],
                       "reducible": a.reducible, "floor": floor, "batches": a.batches,
                       "batch_size": a.batch_size, "noise": a.noise, "seed": a.seed,
                       "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
