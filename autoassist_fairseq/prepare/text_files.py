"""Reading a corpus's text for the preparation: plain or gzip UTF-8, one sentence a line.

Invariant: lines are split on ``\\n`` only, so a stray carriage return inside a crawled
sentence does not shift the alignment of the two sides; undecodable bytes become U+FFFD
rather than stopping the preparation.
"""

import contextlib
import gzip
import os
import re
import sys
from typing import List

import numpy as np

_SPACES = re.compile(r"\s+")


def open_text(path: str, mode: str = "r"):
    """*path* as UTF-8 text, plain or gzip (by its ``.gz`` suffix), lines ending at ``\\n``
    only; ``-``: stdin or stdout."""
    if path == "-":  # not closed on leaving a with block: the process's own stream
        stream = sys.stdin if "r" in mode else sys.stdout
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(encoding="utf-8", errors="replace", newline="\n")
        return contextlib.nullcontext(stream) if "r" in mode else stream
    if "r" in mode and not os.path.isfile(path):
        raise FileNotFoundError(f"no such file: {path}")
    if path.endswith(".gz"):
        return gzip.open(path, mode + "t", encoding="utf-8", newline="\n", errors="replace")
    return open(path, mode, encoding="utf-8", newline="\n", errors="replace")


def count_lines(path: str) -> int:
    with open_text(path) as f:
        return sum(1 for _ in f)


def normalise(line: str) -> str:
    return _SPACES.sub(" ", line).strip()


def read_line_ids(path: str, n: int) -> List[int]:
    with open(path, encoding="utf-8") as f:
        ids = [int(x) for x in f.read().split()]
    if len(ids) != n:
        raise ValueError(f"{path} holds {len(ids)} line ids but the input has {n} lines; "
                         "it must be the --line-ids-out of the step that wrote the input")
    return ids


def lengths(path: str):
    """Token and character counts of every (normalised) line of *path*."""
    toks, chars = [], []
    with open_text(path) as f:
        for line in f:
            line = normalise(line)
            toks.append(len(line.split(" ")) if line else 0)
            chars.append(len(line))
    return np.asarray(toks, dtype=np.int64), np.asarray(chars, dtype=np.int64)
