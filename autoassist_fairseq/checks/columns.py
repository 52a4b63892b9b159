"""Pair checks: evidence, from a pair's own tokens, that it is noise the Boss should not learn.

Loss-based rules see noise late: a pair must be visited, often twice, before its loss can
mark it, and an untranslated copy is easy for the Boss, so its loss never marks it. The
most common noise of crawled corpora is visible in the text itself (Khayrallah & Koehn,
2018): the source copied as the target, or a target in the wrong language, which the
language check (:mod:`.language`) finds. This module fits every check on a corpus
and scores pairs with all of them (:func:`fit_checks`, :func:`pair_check_columns`).

A misaligned pair (the target of another sentence, in the right language) passes that
check; the unrelated check (:mod:`.unrelated`) asks whether its two sides are more
alike than random pairings of the corpus are.

Real crawled noise is subtler (docs/results/paracrawl/README.md): a side is often in a
*third* language, which the two-class identifier cannot name, and a misaligned pair is often
a neighbouring line of the same page, which LSI finds as alike as a translation. Cheaper
signals catch part of that:

- the language check also takes a side's own-language evidence (:mod:`.language`;
  at most :data:`LANGUAGE_EVIDENCE` flags);
- the digits check compares the digits of the numbers on the two sides
  (:data:`DIGITS_MIN_DIFFERENT`, :data:`DIGITS_SHARE`, :data:`DIGITS_ONE_SIDE`).

The script check (:mod:`.scripts`) finds a side in an alphabet its language does not use;
the opt-in lexical check (:mod:`.lexical`) asks for word-for-word correspondence, the langid
check (:mod:`.langid`; on by default, it needs py3langid) a pretrained
identifier of 140 languages. Which checks run and their bars: :mod:`.settings`;
the scores and flags read from the checks' columns: :mod:`.flags` (both re-exported
here).
"""

from typing import Optional, Sequence, Tuple

import numpy as np
import scipy.sparse as sp

from .settings import (  # noqa: F401  (re-exported: the checks' public names)
    CHECKS, COLUMNS, DEFAULT_CHECKS, DIGITS_MIN_DIFFERENT, DIGITS_ONE_SIDE, DIGITS_SHARE,
    FLAG_PROBABILITY, LANGUAGE_EVIDENCE, MIN_OWN_LANGUAGE_SHARE, OLDER_WIDTHS,
    UNRELATED_P_VALUE, CHECK, REGISTRY, PairCheckSettings, add_settings_arguments,
    settings_from_args)
from .flags import (  # noqa: F401  (re-exported: the checks' public names)
    check_languages_differ, check_scores, flag_counts, flagged, union_score)
from .langid import langid_scores
from .language import check_one_vocabulary, language_apply, language_fit
from .digits import digit_counts, digit_scores  # noqa: F401  (re-exported)
from .lexical import lexical_scores
from .scripts import script_fit, script_scores
from .unrelated import unrelated_apply, unrelated_fit
from .words import Side

def pair_check_columns(src_counts: sp.csr_matrix, tgt_counts: sp.csr_matrix,
                       languages: bool = True, symbols: Optional[Sequence[str]] = None,
                       settings: Optional[PairCheckSettings] = None,
                       texts: Optional[Tuple[Side, Side]] = None,
                       langs: Tuple[str, str] = ("", "")) -> np.ndarray:
    """Every check of every pair: ``float32`` (pairs x 11), columns :data:`COLUMNS`
    (:func:`language_scores`, :func:`unrelated_p_value`, :func:`digit_scores`,
    :func:`.lexical.lexical_scores`, :func:`.scripts.script_scores`,
    :func:`.langid.langid_scores`); the columns of a check that did not run
    (``settings.checks``) are NaN, never flagged.

    *symbols*: the text of each subword id (one list for a joined dictionary, or a pair of
    lists: source, target), which the digits and script checks need; *texts* (each side's
    sentences: texts, or :class:`.words.Pieces`) and *langs* (source and target language
    codes), which the langid check needs. Without them, those checks do not run
    (``autoassist-features`` always passes them).

    ``languages=False`` (two dictionaries: a column is not the same subword on both sides,
    so one identifier cannot be fitted over them) leaves the language columns NaN, never
    flagged; the unrelated-sides and lexical checks compare each side in its own columns and
    run."""
    settings = settings or PairCheckSettings()
    fitted, lsi_sides = _fit(src_counts, tgt_counts, languages, symbols, settings, langs)
    held = [lsi_sides]  # _score lets go of the TF-IDF rows once used (2 x corpus size)
    del lsi_sides
    out = fitted._score(src_counts, tgt_counts, texts, held)
    if "lexical" in settings.checks:
        out[:, CHECK["lexical"].at] = lexical_scores(src_counts, tgt_counts, joined=languages)
    return out


class FittedChecks:
    """What the checks learn from one corpus (:func:`fit_checks`), to score other pairs over
    the same vocabulary in batches: :func:`pair_check_columns` of a corpus is :meth:`score` of the
    checks fitted on it, column for column (but the lexical check, which is fitted and
    scored in one call with two folds, and is not offered here)."""

    def __init__(self, settings, languages, symbols, langs, nb, lsi, script):
        self.settings, self.languages, self.symbols, self.langs = (settings, languages,
                                                                   symbols, langs)
        self.nb, self.lsi, self.script = nb, lsi, script

    def _score(self, src_counts, tgt_counts, texts, lsi_sides=None) -> np.ndarray:
        """*lsi_sides*: a list holding the TF-IDF rows of these pairs (taken out of it)."""
        checks = self.settings.checks
        out = np.full((src_counts.shape[0], len(COLUMNS)), np.nan, dtype=np.float32)
        if self.lsi is not None:
            sides = lsi_sides.pop() if lsi_sides else None
            out[:, CHECK["unrelated"].at[0]] = unrelated_apply(self.lsi, src_counts, tgt_counts, sides)
            del sides
        if self.nb is not None:
            out[:, CHECK["language"].at] = language_apply(self.nb, src_counts, tgt_counts)
        elif self.languages and "language" in checks:  # fitted on no pairs
            out[:, CHECK["language"].at] = 0.0
        if self.symbols is not None:
            src_symbols, tgt_symbols = self.symbols
            if "digits" in checks:
                out[:, CHECK["digits"].at] = digit_scores(src_counts, tgt_counts, src_symbols, tgt_symbols)
            if "script" in checks:
                out[:, CHECK["script"].at[0]] = script_scores(src_counts, tgt_counts, src_symbols, tgt_symbols,
                                          joined=self.languages,
                                          rare_script=self.settings.rare_script,
                                          fitted=self.script)
        if "langid" in checks and texts is not None:
            out[:, CHECK["langid"].at[0]] = langid_scores(*texts, *self.langs)
        return out

    def score(self, src_counts: sp.csr_matrix, tgt_counts: sp.csr_matrix,
              texts: Optional[Tuple[Side, Side]] = None) -> np.ndarray:
        """:func:`pair_check_columns`'s columns of these pairs (counts over the fitted vocabulary;
        *texts*: their sentences, for the langid check)."""
        return self._score(src_counts, tgt_counts, texts)


def _fit(src_counts, tgt_counts, languages, symbols, settings, langs):
    nb = lsi = script = lsi_sides = None
    if languages and "language" in settings.checks:
        check_one_vocabulary(src_counts, tgt_counts)
        if src_counts.shape[0]:
            nb = language_fit(src_counts, tgt_counts)
    if "unrelated" in settings.checks:
        lsi, lsi_sides = unrelated_fit(src_counts, tgt_counts)
    if symbols is not None:
        symbols = (symbols, symbols) if isinstance(symbols[0], str) else tuple(symbols)
        if "script" in settings.checks:
            script = script_fit(src_counts, tgt_counts, *symbols, joined=languages,
                                rare_script=settings.rare_script)
    return FittedChecks(settings, languages, symbols, langs, nb, lsi, script), lsi_sides


def fit_checks(src_counts: sp.csr_matrix, tgt_counts: sp.csr_matrix, languages: bool = True,
               symbols: Optional[Sequence[str]] = None,
               settings: Optional[PairCheckSettings] = None,
               langs: Tuple[str, str] = ("", "")) -> FittedChecks:
    """The checks fitted on a corpus (arguments as :func:`pair_check_columns`), to score other pairs
    over the same vocabulary with :meth:`FittedChecks.score`.

    Raises:
        ValueError: *settings* name the lexical check (fitted and scored in one call).
    """
    settings = settings or PairCheckSettings()
    if "lexical" in settings.checks:
        raise ValueError("the lexical check is fitted and scored on one corpus in one call "
                         "(autoassist-features); leave it out of --pair-checks here")
    return _fit(src_counts, tgt_counts, languages, symbols, settings, langs)[0]
