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


def at_least_one(text: str) -> int:
    """argparse type of --last: a whole number >= 1 (with 0, ``found[-n:]`` would be every
    checkpoint; with -2, all but the two oldest)."""
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"needs a whole number of at least 1 (got '{text}'): "
                                         "how many of the newest checkpoints to average")
    return n


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example:\n  python scripts/average_checkpoints.py --dir checkpoints/ --last 5 "
               "--output checkpoints/checkpoint.avg5.pt")
    parser.add_argument("--dir", required=True,
                        help="checkpoint directory (the --save-dir of fairseq-train)")
    parser.add_argument("--last", type=at_least_one, required=True,
                        help="how many of the newest update (or else epoch) checkpoints to "
                             "average (at least 1)")
    parser.add_argument("--output", required=True, help="where to write the averaged checkpoint")
    args = parser.parse_args(argv)
    if not os.path.isdir(args.dir):
        what = "is not a directory" if os.path.exists(args.dir) else "does not exist"
        parser.error(f"--dir {args.dir} {what}: give the directory that holds the checkpoints "
                     "(the --save-dir of fairseq-train)")
    if os.path.isdir(args.output):
        parser.error(f"--output {args.output} is a directory: give the file to write, e.g. "
                     f"{os.path.join(args.output, f'checkpoint.avg{args.last}.pt')}")

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
    tmp = args.output + ".tmp"
    try:
        os.makedirs(os.path.dirname(os.path.abspath(args.output)) or ".", exist_ok=True)
        torch.save(state, tmp)
        os.replace(tmp, args.output)
    except (OSError, RuntimeError) as e:  # torch's zip writer fails with RuntimeError
        print(f"ERROR: cannot write the averaged checkpoint {args.output}: {e}", file=sys.stderr)
        return 1
    finally:
        if os.path.isfile(tmp):  # a failed save leaves no half-written file behind
            os.remove(tmp)
    print(f"averaged {len(paths)} checkpoints ({', '.join(map(os.path.basename, paths))}) -> {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
