#!/usr/bin/env python
"""Padding and batch count of AutoAssist's batches against fairseq's, on a real dataset.

    python scripts/benchmark_padding.py work/multi30k --source-lang en --target-lang de

With every candidate accepted (the generator's worst case for fragmentation), for several
``--assistant-window`` sizes. Padding = 1 - real tokens / padded tokens, counting source
and target as fairseq's collater pads them.
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
        epilog="example:\n  python scripts/benchmark_padding.py work/multi30k/data "
               "--source-lang en --target-lang de --windows 2048 4096")
    parser.add_argument("data", help="data directory written by fairseq-preprocess "
                                     "(its train split is used)")
    parser.add_argument("--source-lang", "-s", required=True, help="source language")
    parser.add_argument("--target-lang", "-t", required=True, help="target language")
    parser.add_argument("--max-tokens", type=int, default=4096,
                        help="tokens per batch, as fairseq-train's --max-tokens (default 4096)")
    parser.add_argument("--windows", type=int, nargs="+", default=[1024, 2048, 4096, 8192, 16384],
                        help="--assistant-window sizes to compare "
                             "(default 1024 2048 4096 8192 16384)")
    args = parser.parse_args()
    sides = []
    for lang in (args.source_lang, args.target_lang):
        d = Dictionary.load(os.path.join(args.data, f"dict.{lang}.txt"))
        ds = data_utils.load_indexed_dataset(
            os.path.join(args.data, f"train.{args.source_lang}-{args.target_lang}.{lang}"), d)
        sides.append(np.array(ds.sizes, dtype=np.int64))  # copy: the map closes with ds
    src, tgt = sides
    with data_utils.numpy_seed(1):  # LanguagePairDataset.ordered_indices, then batch_by_size
        order = np.random.permutation(len(src))
        order = order[np.argsort(tgt[order], kind="mergesort")]
        order = order[np.argsort(src[order], kind="mergesort")]
    fairseq_batches = data_utils.batch_by_size(order, None, max_tokens=args.max_tokens,
                                               num_tokens_vec=np.maximum(src, tgt)[order])
    print("| batching | batches | padding |\n|---|---|---|")
    print(f"| fairseq (global length sort) | {len(fairseq_batches)} | "
          f"{padding(fairseq_batches, src, tgt):.4f} |")
    for w in args.windows:
        gen = BatchGenerator(np.arange(len(src)), src, tgt, max_tokens=args.max_tokens,
                             window_size=w)
        gen.begin_epoch(1)
        batches = []
        while True:  # one data pass
            plan = gen.next_window(np.ones_like)
            batches += plan.batches
            if plan.ends_pass:
                break
        print(f"| AutoAssist, window {w} | {len(batches)} | {padding(batches, src, tgt):.4f} |")


if __name__ == "__main__":
    main()
