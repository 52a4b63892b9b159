"""The raw pair files the tools read: tab-separated sentence pairs, one a line, in a plain or
gzip file or on stdin, and a seeded uniform sample of them, taken in one pass.
"""

import random
from typing import Iterator, List, Optional, Tuple


class InputError(ValueError):
    """Input that is not tab-separated sentence pairs (its message names the line)."""


def read_pairs(lines, name: str) -> Iterator[Tuple[str, str]]:
    """(source, target) of each line ``SOURCE<tab>TARGET`` (its line end dropped).

    Raises:
        InputError: a line without exactly one tab, named by its number.
    """
    for number, line in enumerate(lines, 1):
        pair = line.rstrip("\n").split("\t")
        if len(pair) == 2:
            yield pair[0], pair[1]
        else:
            line = line.rstrip("\n")
            raise InputError(
                f"{name}, line {number}: {line.count(chr(9))} tabs; each line must be one "
                "pair, SOURCE<tab>TARGET (exactly one tab; replace tabs inside a sentence "
                "by spaces, e.g. paste the two sides of a corpus: paste corpus.en corpus.de)")


def sample_pairs(pairs, size: int, seed: int = 0, keep=None,
                 lines: Optional[list] = None) -> Tuple[List[Tuple[str, str]], int]:
    """A uniform sample of at most *size* pairs (reservoir sampling, seeded), in input order
    while the input has no more than *size* pairs (then it is the input); *keep*: a callable
    that also receives every pair (to spool the input); *lines*: a list that receives the
    0-based input line of each sample pair (sample order). Returns (sample, pairs read)."""
    rng = random.Random(seed)
    sample: List[Tuple[str, str]] = []
    where: List[int] = [] if lines is None else lines
    n = 0
    for n, pair in enumerate(pairs, 1):
        if keep is not None:
            keep(pair)
        if len(sample) < size:
            sample.append(pair)
            where.append(n - 1)
        else:
            j = rng.randrange(n)
            if j < size:
                sample[j] = pair
                where[j] = n - 1
    return sample, n
