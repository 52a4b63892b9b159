#!/usr/bin/env python
"""Padding and batch count of AutoAssist's batches against fairseq's, on a real dataset.

    python -m research.benchmark_padding work/multi30k --source-lang en --target-lang de

For several ``--assistant-window`` sizes and acceptance rates (each pair accepted with that
probability), against fairseq's batching of the same accepted pairs (one global length
sort). Padding = 1 - real tokens / padded tokens, counting source and target as fairseq's
collater pads them.
"""

import argparse
import os

import numpy as np
from fairseq.data import Dictionary, data_utils

from autoassist_fairseq.data.batch_generator import BatchGenerator


def padding(batches, src, tgt):
    real = sum(src[b].sum() + tgt[b].sum() for b in batches)
    padded = sum(len(b) * (src[b].max() + tgt[b].max()) for b in batches)
    return float(1 - real / padded)


def main():
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example:\n  python -m research.benchmark_padding work/multi30k "
               "--source-lang en --target-lang de --windows 2048 4096 --accept 1 0.5")
    parser.add_argument("data", help="data directory written by fairseq-preprocess "
                                     "(its train split is used)")
    parser.add_argument("--source-lang", "-s", required=True, help="source language")
    parser.add_argument("--target-lang", "-t", required=True, help="target language")
    parser.add_argument("--max-tokens", type=int, default=4096,
                        help="tokens per batch, as fairseq-train's --max-tokens (default 4096)")
    parser.add_argument("--windows", type=int, nargs="+", default=[1024, 2048, 4096, 8192, 16384],
                        help="--assistant-window sizes to compare "
                             "(default 1024 2048 4096 8192 16384)")
    parser.add_argument("--accept", type=float, nargs="+", default=[1.0, 0.6],
                        help="acceptance rates to compare (default 1.0 0.6)")
    args = parser.parse_args()
    sides = []
    for lang in (args.source_lang, args.target_lang):
        d = Dictionary.load(os.path.join(args.data, f"dict.{lang}.txt"))
        ds = data_utils.load_indexed_dataset(
            os.path.join(args.data, f"train.{args.source_lang}-{args.target_lang}.{lang}"), d)
        sides.append(np.array(ds.sizes, dtype=np.int64))  # copy: the map closes with ds
    src, tgt = sides
    if not all(0 < r <= 1 for r in args.accept):
        parser.error(f"--accept {args.accept}: rates must be in (0, 1]")
    print("| batching | accepted | batches | padding |\n|---|---|---|---|")
    for rate in args.accept:
        # one fixed random subset per rate, so that every window size batches the same pairs
        keep = np.random.default_rng(0).random(len(src)) < rate if rate < 1 else \
            np.ones(len(src), bool)
        fb = fairseq_batches(np.flatnonzero(keep), src, tgt, args.max_tokens)
        print(f"| fairseq (global length sort) | {rate:g} | {len(fb)} | "
              f"{padding(fb, src, tgt):.4f} |")
        for w in args.windows:
            gen = BatchGenerator(np.arange(len(src)), src, tgt, max_tokens=args.max_tokens,
                                 window_size=w)
            gen.begin_pass(1)
            batches = []
            while True:  # one data pass
                plan = gen.next_window(lambda ids: keep[ids].astype(np.float64))
                batches += plan.batches
                if plan.ends_pass:
                    break
            print(f"| AutoAssist, window {w} | {rate:g} | {len(batches)} | "
                  f"{padding(batches, src, tgt):.4f} |")

def fairseq_batches(ids, src, tgt, max_tokens):
    """LanguagePairDataset.ordered_indices (random ties, then target, then source length),
    then fairseq's batch_by_size."""
    with data_utils.numpy_seed(1):
        order = ids[np.random.permutation(len(ids))]
    order = order[np.argsort(tgt[order], kind="mergesort")]
    order = order[np.argsort(src[order], kind="mergesort")]
    return data_utils.batch_by_size(order, None, max_tokens=max_tokens,
                                    num_tokens_vec=np.maximum(src, tgt)[order])

if __name__ == "__main__":
    main()
