"""The script check: is a side written in an alphabet its language does not use?

A crawled line in Russian, Hindi or Chinese on one side of an English-German pair is a side
in a third language that the two-class identifier of :func:`.language.language_scores`
cannot name, but its letters give it away at once. Which alphabets a side's language uses is
read from the corpus itself, not from a list per language: a script (the first word of a
letter's Unicode name: ``LATIN``, ``CYRILLIC``, ``CJK``, ``HIRAGANA``, ``DEVANAGARI``, ...;
``FULLWIDTH``/``HALFWIDTH`` forms count as their script) is *rare on a side* when it holds
under :data:`RARE_SCRIPT` of that side's letters over the corpus. So Latin letters on the
Japanese side of an English-Japanese corpus (names, brands) are as much its own as kana and
kanji, and only scripts that almost never occur on a side mark it.

A side's *foreign-script share* is the share of its letters, over the subwords the other
side does not hold as such (a name in Cyrillic or Chinese copied onto both sides is not a
side in another language), that are in scripts rare on its side; the pair takes the larger
of its two sides' shares. It is flagged from :data:`SCRIPT_SHARE` on, when at least
:data:`_MIN_LETTERS` such letters carry it (a stray Greek letter of a unit, Ω, is not a
language). A third language in the same script (Spanish on the English side) passes: the
language check's own-language evidence is the one to find it. The cost is one sparse
product per side with a (vocabulary x scripts) table of the subwords' letters.
"""

import unicodedata
from typing import Optional, Sequence

import numpy as np
import scipy.sparse as sp

from .settings import RARE_SCRIPT, SCRIPT_SHARE  # noqa: F401  (the bars' home)

_MIN_LETTERS = 3  # letters in rare scripts a side needs before its share can flag it
_WIDTH_FORMS = ("FULLWIDTH", "HALFWIDTH")


def letter_script(ch: str) -> str:
    """The script of a letter: the first word of its Unicode name (the second for
    full-width and half-width forms); '' for a character without a name."""
    words = unicodedata.name(ch, "").split()
    if words and words[0] in _WIDTH_FORMS:
        words = words[1:]
    return words[0] if words else ""


def script_table(symbols: Sequence[str], vocab_size: int):
    """Letters of each script in each subword: a ``float32`` csr matrix (vocab_size x
    scripts) and the scripts' names."""
    scripts, rows, cols, vals = {}, [], [], []
    for i, symbol in enumerate(symbols[:vocab_size]):
        per_script = {}
        for ch in symbol:
            if ch.isalpha():
                s = scripts.setdefault(letter_script(ch), len(scripts))
                per_script[s] = per_script.get(s, 0) + 1
        for s, k in per_script.items():
            rows.append(i)
            cols.append(s)
            vals.append(k)
    table = sp.csr_matrix((np.asarray(vals, dtype=np.float32), (rows, cols)),
                          shape=(vocab_size, max(len(scripts), 1)))
    return table, list(scripts)


def rare_scripts(counts: sp.csr_matrix, table: sp.csr_matrix,
                 rare_script: float = RARE_SCRIPT) -> np.ndarray:
    """Which scripts are rare on a side (1.0) over its corpus: under *rare_script* of the
    letters of *counts* (its subword counts; *table*: :func:`script_table`)."""
    totals = table.T @ np.asarray(counts.sum(axis=0)).ravel()
    return (totals < rare_script * max(float(totals.sum()), 1.0)).astype(np.float32)


def foreign_script_share(counts: sp.csr_matrix, own: sp.csr_matrix, table: sp.csr_matrix,
                         rare_script: float = RARE_SCRIPT,
                         rare: Optional[np.ndarray] = None) -> np.ndarray:
    """Per sentence of one side, the share of the letters of *own* (its subword counts less
    those the other side shares; *counts* itself where no column is shared) that are in
    scripts rare on the side (under *rare_script* of its letters in *counts*); NaN under
    :data:`_MIN_LETTERS` such letters. *table*: :func:`script_table` of the side's
    vocabulary; *rare*: :func:`rare_scripts` of another corpus of the side, fitted there
    (default: of *counts*)."""
    if rare is None:
        rare = rare_scripts(counts, table, rare_script)
    letters = own @ table
    in_rare = np.asarray(letters @ rare).ravel()
    all_letters = np.asarray(letters.sum(axis=1)).ravel()
    with np.errstate(invalid="ignore", divide="ignore"):
        share = in_rare / all_letters
    return np.where(in_rare >= _MIN_LETTERS, share, np.nan).astype(np.float32)


def script_fit(src_counts: sp.csr_matrix, tgt_counts: sp.csr_matrix,
               src_symbols: Sequence[str], tgt_symbols: Sequence[str], joined: bool = True,
               rare_script: float = RARE_SCRIPT):
    """What the script check learns from a corpus: each side's :func:`script_table` and
    :func:`rare_scripts`, ``((source table, target table), (source rare, target rare))``."""
    src_table = script_table(src_symbols, src_counts.shape[1])[0]
    # joined: a column is the same subword on both sides, so one table serves both
    tgt_table = src_table if joined else script_table(tgt_symbols, tgt_counts.shape[1])[0]
    return (src_table, tgt_table), (rare_scripts(src_counts, src_table, rare_script),
                                    rare_scripts(tgt_counts, tgt_table, rare_script))


def script_scores(src_counts: sp.csr_matrix, tgt_counts: sp.csr_matrix,
                  src_symbols: Sequence[str], tgt_symbols: Sequence[str],
                  joined: bool = True, rare_script: float = RARE_SCRIPT,
                  fitted: Optional[tuple] = None) -> np.ndarray:
    """Per pair, the larger foreign-script share of its two sides (NaN: neither side holds
    :data:`_MIN_LETTERS` letters of a rare script). *joined*: one vocabulary on both sides,
    so that the subwords the two sides share can be left out (with two vocabularies a
    column is not the same subword on both sides, and every letter counts). *fitted*:
    :func:`script_fit` of a corpus over the same vocabulary (default: of these pairs)."""
    shared = src_counts.minimum(tgt_counts) if joined else None
    tables, rares = fitted or script_fit(src_counts, tgt_counts, src_symbols, tgt_symbols,
                                         joined, rare_script)
    shares = [foreign_script_share(c, c - shared if joined else c, table, rare_script, rare)
              for c, table, rare in zip((src_counts, tgt_counts), tables, rares)]
    return np.fmax(*shares)
