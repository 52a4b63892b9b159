"""The digits check's scores: the digits of the numbers on each side of a pair.

A translation keeps its numbers (their format may change: 1,914.00 and 1.914,00 hold the same
digits); a misaligned line of a price list or a calendar does not. The bars that flag a pair
are in :mod:`.settings`, the flags in :func:`.columns.check_scores`.
"""

from typing import Sequence

import numpy as np
import scipy.sparse as sp


def digit_counts(counts: sp.csr_matrix, symbols: Sequence[str]) -> np.ndarray:
    """How often each digit 0-9 occurs in the numbers of each sentence (pairs x 10), from its
    subword counts and the subwords' text. Only subwords without letters count: the digits of
    a name or code ("MP3", "s12") are not a number a translation must keep."""
    table = np.zeros((counts.shape[1], 10), dtype=np.float32)
    for i, symbol in enumerate(symbols[:counts.shape[1]]):
        if any(ch.isalpha() for ch in symbol):
            continue
        for ch in symbol:
            if "0" <= ch <= "9":
                table[i, ord(ch) - 48] += 1
    return np.asarray(counts @ table)


def digit_scores(src_counts, tgt_counts, src_symbols, tgt_symbols) -> np.ndarray:
    """Per pair: digits without a counterpart on the other side, the source's digits and the
    target's digits (pairs x 3)."""
    a, b = digit_counts(src_counts, src_symbols), digit_counts(tgt_counts, tgt_symbols)
    return np.stack([np.abs(a - b).sum(axis=1), a.sum(axis=1), b.sum(axis=1)],
                    axis=1).astype(np.float32)
