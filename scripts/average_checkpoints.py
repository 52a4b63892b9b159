#!/usr/bin/env python3
"""Average the parameters of the last N fairseq checkpoints of a directory.

fairseq's own ``scripts/average_checkpoints.py`` lives in the fairseq source tree and is
not installed by the ``fairseq`` / ``fairseq-fixed`` wheels, so ``evaluate.sh`` uses this
small equivalent. "Last" means: the update checkpoints ``checkpoint_<epoch>_<update>.pt``
(``--save-interval-updates``) with the highest update numbers when any exist, otherwise
the epoch checkpoints ``checkpoint<epoch>.pt`` with the highest epochs.

    python scripts/average_checkpoints.py --dir checkpoints/ --last 5 --output avg5.pt

The output keeps everything else (config, optimizer-free) from the newest checkpoint,
so ``fairseq-generate --path avg5.pt`` reads it like any checkpoint.
"""

import argparse
import collections
import os
import re
import sys

import torch


def find_last(directory: str, n: int):
    by_update, by_epoch = [], []
    for name in os.listdir(directory):
        m = re.fullmatch(r"checkpoint_(\d+)_(\d+)\.pt", name)
        if m:
            by_update.append((int(m.group(2)), name))
            continue
        m = re.fullmatch(r"checkpoint(\d+)\.pt", name)
        if m:
            by_epoch.append((int(m.group(1)), name))
    found = sorted(by_update) if by_update else sorted(by_epoch)
    return [os.path.join(directory, name) for _, name in found[-n:]]


def load(path: str):
    # our own training checkpoints: they hold configs (not just tensors)
    return torch.load(path, map_location="cpu", weights_only=False)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example:\n  python scripts/average_checkpoints.py --dir checkpoints/ --last 5 "
               "--output checkpoints/checkpoint.avg5.pt")
    parser.add_argument("--dir", required=True,
                        help="checkpoint directory (the --save-dir of fairseq-train)")
    parser.add_argument("--last", type=int, required=True,
                        help="how many of the newest update (or else epoch) checkpoints to "
                             "average")
    parser.add_argument("--output", required=True, help="where to write the averaged checkpoint")
    args = parser.parse_args(argv)

    paths = find_last(args.dir, args.last)
    if len(paths) < args.last:
        print(f"ERROR: asked to average {args.last} checkpoints but {args.dir} holds only "
              f"{len(paths)} epoch/update checkpoints ({', '.join(map(os.path.basename, paths)) or 'none'}); "
              f"train without --no-epoch-checkpoints or lower --avg-last", file=sys.stderr)
        return 1
    total = collections.OrderedDict()
    state = None
    for path in paths:
        state = load(path)
        for key, value in state["model"].items():
            value = value.float() if value.is_floating_point() else value
            if key in total and value.is_floating_point():
                total[key] += value
            elif key not in total:
                total[key] = value.clone()
    for key, value in total.items():
        if value.is_floating_point():
            total[key] = value / len(paths)
    state["model"] = total
    state["last_optimizer_state"] = None  # not meaningful for an average
    os.makedirs(os.path.dirname(os.path.abspath(args.output)) or ".", exist_ok=True)
    torch.save(state, args.output + ".tmp")
    os.replace(args.output + ".tmp", args.output)
    print(f"averaged {len(paths)} checkpoints ({', '.join(map(os.path.basename, paths))}) -> {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
