"""Time the token fingerprint (``features.fingerprint.token_fingerprint``) at WMT scale.

The fingerprint hashes the binarised token ids of both sides, so its cost is linear in the
tokens. This writes the two ``.bin`` files of PAIRS pairs (uint16 ids, fairseq's dtype for
a vocabulary under 65,500) whose sentences have the mean length of the WMT14 en-de sample's
tokenized training text plus the end-of-sentence token, hashes them twice (the second read
comes from the page cache, as at a run's start right after preprocessing) and prints the
seconds, and the same scaled to 4M pairs.

    python -m research.fingerprint_cost --pairs 1000000 \
        --sample ../shared/data/wmt14-en-de-sample/train-sample-tok
"""

import argparse
import gzip
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from autoassist_fairseq.features.fingerprint import token_fingerprint

SAMPLE = Path(__file__).resolve().parents[2] / "shared" / "data" / "wmt14-en-de-sample" / \
    "train-sample-tok"


def mean_tokens(sample: Path, lang: str) -> float:
    with gzip.open(sample / f"train-sample.tok.{lang}.gz", "rt", encoding="utf-8") as f:
        lengths = [len(line.split()) + 1 for line in f]  # + the end-of-sentence token
    return float(np.mean(lengths))


def main():
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example:\n  python -m research.fingerprint_cost --pairs 1000000 \\\n"
               "      --sample ../shared/data/wmt14-en-de-sample/train-sample-tok")
    parser.add_argument("--pairs", type=int, default=1_000_000,
                        help="pairs of the generated .bin files (default: %(default)s)")
    parser.add_argument("--sample", type=Path, default=SAMPLE,
                        help="the WMT14 sample's train-sample-tok folder (default: %(default)s)")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        files, total = [], 0
        for lang in ("en", "de"):
            tokens = int(round(mean_tokens(args.sample, lang) * args.pairs))
            path = os.path.join(tmp, f"train.en-de.{lang}.bin")
            rng.integers(4, 32000, tokens, dtype=np.uint16).tofile(path)
            files.append(path)
            total += tokens
        for attempt in ("first", "second"):
            start = time.perf_counter()
            token_fingerprint(files)
            seconds = time.perf_counter() - start
            print(f"{attempt} read: {args.pairs:,} pairs, {total:,} tokens "
                  f"({2 * total / 1e6:.0f} MB): {seconds:.2f} s; scaled to 4M pairs: "
                  f"{seconds * 4e6 / args.pairs:.2f} s")


if __name__ == "__main__":
    main()
