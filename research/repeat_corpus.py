"""A binarised corpus many times its size: its train split repeated, for timing
``autoassist-features`` at millions of pairs with real words (``research.features_time``).

Every batch of the langid check (250,000 pairs) then holds as many distinct words as the
original corpus, as a batch of a real corpus of that size would; per pair, the other checks'
work does not depend on what the pairs say.

    python -m research.repeat_corpus /root/aa-work/clean/tatoeba -s de -t en --times 25 \\
        --out /root/aa-work/t4m
"""

import os
import shutil
import sys

from research.bench import BenchmarkError, doc_parser


def repeat_corpus(data: str, src: str, tgt: str, times: int, out: str) -> int:
    """Write OUT/train.SRC-TGT.{SRC,TGT}.{bin,idx}, DATA's train split *times* over, and
    DATA's dictionaries; returns the pairs written."""
    from fairseq.data import indexed_dataset

    prefix = os.path.join(data, f"train.{src}-{tgt}.")
    for lang in (src, tgt):
        for part in (f"{prefix}{lang}.bin", f"{prefix}{lang}.idx",
                     os.path.join(data, f"dict.{lang}.txt")):
            if not os.path.exists(part):
                raise BenchmarkError(f"{part} not found: give the folder fairseq-preprocess "
                                     "wrote and its -s/-t")
    os.makedirs(out, exist_ok=True)
    pairs = 0
    for lang in (src, tgt):
        shutil.copyfile(os.path.join(data, f"dict.{lang}.txt"),
                        os.path.join(out, f"dict.{lang}.txt"))
        target = os.path.join(out, f"train.{src}-{tgt}.{lang}")
        with open(os.path.join(data, f"dict.{lang}.txt"), encoding="utf-8") as f:
            vocab = sum(1 for _ in f)
        builder = indexed_dataset.make_builder(target + ".bin", impl="mmap",
                                               vocab_size=vocab + 4)  # + fairseq's specials
        for _ in range(times):
            builder.merge_file_(prefix + lang)
        builder.finalize(target + ".idx")
        pairs = len(indexed_dataset.MMapIndexedDataset(target))
    return pairs


def main(argv=None):
    p = doc_parser(__doc__)
    p.add_argument("data", help="a folder fairseq-preprocess wrote (its train split is read)")
    p.add_argument("-s", "--source-lang", required=True, help="source language code of DATA")
    p.add_argument("-t", "--target-lang", required=True, help="target language code of DATA")
    p.add_argument("--times", type=int, required=True, help="how many copies of the split")
    p.add_argument("--out", required=True, help="the folder to write")
    a = p.parse_args(argv)
    if a.times < 1:
        p.error(f"--times {a.times}: give at least 1")
    if os.path.abspath(a.out) == os.path.abspath(a.data):
        p.error("--out: a folder other than DATA")
    try:
        pairs = repeat_corpus(a.data, a.source_lang, a.target_lang, a.times, a.out)
    except BenchmarkError as err:
        sys.exit(f"repeat_corpus.py: error: {err}")
    print(f"wrote {a.out}: {pairs} pairs")


if __name__ == "__main__":
    main()
