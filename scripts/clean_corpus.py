#!/usr/bin/env python3
"""Copy one split of a parallel corpus (plain or .gz) to plain text, optionally filtered.

With ``--filter`` (training data) a pair is dropped when either side is empty, has
fewer than ``--min-len`` or more than ``--max-len`` words, or when the longer side has
more than ``--ratio`` times the words of the shorter one (the rules of Moses'
``clean-corpus-n.perl``). Pairs stay aligned. Without ``--filter`` (valid/test sets)
every line is kept, byte for byte.

In both modes the two sides must have the same number of lines; otherwise the script
stops with a message naming both files and their counts (exit status 2). A missing
input stops with the file named (exit status 2).

Lines are split on ``\\n`` only, so a stray carriage return inside a sentence (common
in crawled data) does not shift the alignment. With ``--filter`` the kept text is also
whitespace-normalised (runs of spaces, tabs and other separators become one space).

Example::

    python scripts/clean_corpus.py --in-src raw/train.en.gz --in-tgt raw/train.de.gz \\
        --out-src out/train.en --out-tgt out/train.de --filter
"""

import argparse
import gzip
import io
import os
import re
import sys

_SPACES = re.compile(r"\s+")


def open_text(path: str, mode: str = "r"):
    """Open *path* as UTF-8 text, gunzipping ``.gz`` files; lines end at ``\\n`` only."""
    if path.endswith(".gz"):
        raw = gzip.open(path, mode.replace("t", "") + "b")
        return io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline="\n")
    return open(path, mode, encoding="utf-8", errors="replace", newline="\n")


def count_lines(path: str) -> int:
    with open_text(path) as f:
        return sum(1 for _ in f)


def keep_pair(src_words: int, tgt_words: int, min_len: int, max_len: int, ratio: float) -> bool:
    if not (min_len <= src_words <= max_len and min_len <= tgt_words <= max_len):
        return False
    return src_words <= ratio * tgt_words and tgt_words <= ratio * src_words


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--in-src", required=True)
    parser.add_argument("--in-tgt", required=True)
    parser.add_argument("--out-src", required=True)
    parser.add_argument("--out-tgt", required=True)
    parser.add_argument("--filter", action="store_true",
                        help="drop empty / too short / too long / badly length-matched pairs")
    parser.add_argument("--min-len", type=int, default=1)
    parser.add_argument("--max-len", type=int, default=250)
    parser.add_argument("--ratio", type=float, default=1.5)
    args = parser.parse_args(argv)

    for path in (args.in_src, args.in_tgt):
        if not os.path.isfile(path):
            print(f"ERROR: missing input file: {path}", file=sys.stderr)
            return 2
    n_src, n_tgt = count_lines(args.in_src), count_lines(args.in_tgt)
    if n_src != n_tgt:
        print(f"ERROR: line-count mismatch: {args.in_src} has {n_src} lines but "
              f"{args.in_tgt} has {n_tgt}", file=sys.stderr)
        return 2

    for path in (args.out_src, args.out_tgt):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp_src, tmp_tgt = args.out_src + ".tmp", args.out_tgt + ".tmp"
    kept = 0
    with open_text(args.in_src) as fs, open_text(args.in_tgt) as ft, \
            open(tmp_src, "w", encoding="utf-8", newline="\n") as gs, \
            open(tmp_tgt, "w", encoding="utf-8", newline="\n") as gt:
        for src, tgt in zip(fs, ft):
            if args.filter:
                src = _SPACES.sub(" ", src).strip()
                tgt = _SPACES.sub(" ", tgt).strip()
                if not keep_pair(len(src.split(" ")) if src else 0, len(tgt.split(" ")) if tgt else 0,
                                 args.min_len, args.max_len, args.ratio):
                    continue
                src, tgt = src + "\n", tgt + "\n"
            else:
                src = src if src.endswith("\n") else src + "\n"
                tgt = tgt if tgt.endswith("\n") else tgt + "\n"
            gs.write(src)
            gt.write(tgt)
            kept += 1
    os.replace(tmp_src, args.out_src)
    os.replace(tmp_tgt, args.out_tgt)
    if args.filter:
        print(f"kept {kept} of {n_src} pairs ({n_src - kept} dropped: empty, length outside "
              f"{args.min_len}-{args.max_len} words or length ratio > {args.ratio}) -> "
              f"{args.out_src}, {args.out_tgt}")
    else:
        print(f"copied {kept} pairs -> {args.out_src}, {args.out_tgt}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
