"""Pair checks: evidence, from a pair's own tokens, that it is noise the Boss should not learn.

Loss-based rules see noise late: a pair must be visited, often twice, before its loss can
mark it, and an untranslated copy is easy for the Boss, so its loss never marks it. The
most common noise of crawled corpora is visible in the text itself (Khayrallah & Koehn,
2018): the source copied as the target, or a target in the wrong language. Both are a
side written in the *other* language of the pair.

The check is a naive Bayes language identifier with one class per side of the corpus,
fitted on the corpus itself (scikit-learn's ``MultinomialNB`` over the same subword counts
as the TF-IDF features). A side gets P(it is in the other side's language); it is flagged
above :data:`FLAG_PROBABILITY`. Noise blurs the two classes only a little. No model is
downloaded; a corpus whose sides are one language cannot be told apart, which
:func:`check_languages_differ` reports instead of flagging pairs at random.

A misaligned pair (the target of another sentence, in the right language) passes that
check; the unrelated check (:mod:`.unrelated_check`) asks whether its two sides are more
alike than random pairings of the corpus are.

Real crawled noise is subtler (docs/results/paracrawl/README.md): a side is often in a
*third* language, which the two-class identifier cannot name, and a misaligned pair is often
a neighbouring line of the same page, which LSI finds as alike as a translation. Cheaper
signals catch part of that:

- the language check also takes a side's *own-language evidence*: the mean naive Bayes
  log-likelihood ratio (its language against the other) of the subwords it does not share
  with the other side (names and numbers are copied across; a third language is not). A
  real sentence scores far above 0, a third language near it; at most
  :data:`LANGUAGE_EVIDENCE` flags;
- the digits check compares the digits of the numbers on the two sides
  (:data:`DIGITS_MIN_DIFFERENT`, :data:`DIGITS_SHARE`, :data:`DIGITS_ONE_SIDE`).

The script check (:mod:`.scripts`) finds a side in an alphabet its language does not use;
the opt-in lexical check (:mod:`.lexical`) asks for word-for-word correspondence, the langid
check (:mod:`.langid_check`; on by default, it needs py3langid) a pretrained
identifier of 140 languages. Which checks run and their bars: :mod:`.check_settings`;
the scores and flags read from the checks' columns: :mod:`.check_flags` (both re-exported
here).
"""

from typing import Optional, Sequence, Tuple

import numpy as np
import scipy.sparse as sp
from sklearn.naive_bayes import MultinomialNB

from .check_settings import (  # noqa: F401  (re-exported: the checks' public names)
    CHECKS, COLUMNS, DEFAULT_CHECKS, DIGITS_MIN_DIFFERENT, DIGITS_ONE_SIDE, DIGITS_SHARE,
    FLAG_PROBABILITY, LANGUAGE_EVIDENCE, MIN_OWN_LANGUAGE_SHARE, OLDER_WIDTHS,
    UNRELATED_P_VALUE, _COUNT_KEYS, PairCheckSettings, add_settings_arguments, settings_from_args)
from .check_flags import (  # noqa: F401  (re-exported: the checks' public names)
    check_languages_differ, check_scores, flag_counts, flagged, union_score)
from .langid_check import langid_scores
from .digits import digit_counts, digit_scores  # noqa: F401  (re-exported)
from .lexical import lexical_scores
from .scripts import script_fit, script_scores
from .unrelated_check import unrelated_apply, unrelated_fit
from .words import Side

_MIN_OWN_SUBWORDS = 3  # unshared subwords a side needs for its own-language evidence


def other_language_probability(src_counts: sp.csr_matrix, tgt_counts: sp.csr_matrix) -> np.ndarray:
    """P(each side is written in the other side's language), per pair: the first two columns
    of :func:`language_scores`."""
    return language_scores(src_counts, tgt_counts)[:, :2]


def language_scores(src_counts: sp.csr_matrix, tgt_counts: sp.csr_matrix) -> np.ndarray:
    """The language check's scores of each pair.

    Args:
        src_counts (scipy.sparse.csr_matrix): source subword counts (pairs x vocabulary).
        tgt_counts (scipy.sparse.csr_matrix): target subword counts over the same
            vocabulary (fairseq-preprocess ``--joined-dictionary``).

    Returns:
        np.ndarray: ``float32`` (pairs x 3): column 0 P(source side is in the target
        language), column 1 P(target side is in the source language) (a side without tokens
        gets 0.5), column 2 the own-language evidence: of the two sides, the smaller mean
        log-likelihood ratio (own language against the other, nats per subword) over its
        subwords that the other side lacks (+inf for a side with fewer than 3 such).
    """
    _one_vocabulary(src_counts, tgt_counts)
    if src_counts.shape[0] == 0:
        return np.zeros((0, 3), dtype=np.float32)
    return language_apply(language_fit(src_counts, tgt_counts), src_counts, tgt_counts)


def _one_vocabulary(src_counts: sp.csr_matrix, tgt_counts: sp.csr_matrix) -> None:
    if src_counts.shape != tgt_counts.shape:
        raise ValueError(f"pair checks need both sides over one vocabulary (fairseq-preprocess "
                         f"--joined-dictionary): source counts {src_counts.shape}, target "
                         f"counts {tgt_counts.shape}")


def language_fit(src_counts: sp.csr_matrix, tgt_counts: sp.csr_matrix) -> MultinomialNB:
    """The language check's two-class identifier, fitted on a corpus's pairs (at least one)."""
    n = src_counts.shape[0]
    # class 0: the source language, 1: the target language; one side at a time, so that the
    # two count matrices are never stacked into a copy (2 x 4.5M rows for WMT14)
    nb = MultinomialNB(alpha=1.0, fit_prior=False)
    nb.partial_fit(src_counts, np.zeros(n, dtype=np.int64), classes=[0, 1])
    nb.partial_fit(tgt_counts, np.ones(n, dtype=np.int64))
    return nb


def language_apply(nb: MultinomialNB, src_counts: sp.csr_matrix,
                   tgt_counts: sp.csr_matrix) -> np.ndarray:
    """:func:`language_scores` of pairs under an identifier of :func:`language_fit` (fitted
    on them, or on another corpus over the same vocabulary)."""
    n = src_counts.shape[0]
    if n == 0:
        return np.zeros((0, 3), dtype=np.float32)
    out = np.empty((n, 3), dtype=np.float32)
    out[:, 0] = nb.predict_proba(src_counts)[:, 1]
    out[:, 1] = nb.predict_proba(tgt_counts)[:, 0]
    ratio = (nb.feature_log_prob_[0] - nb.feature_log_prob_[1]).astype(np.float32)
    shared = src_counts.minimum(tgt_counts)
    evidence = []
    for counts, sign in ((src_counts, 1.0), (tgt_counts, -1.0)):
        own = counts - shared
        own_len = np.asarray(own.sum(axis=1)).ravel()
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = sign * (own @ ratio) / own_len
        # too few subwords of its own to tell (a name or two): left to column 0/1
        evidence.append(np.where(own_len >= _MIN_OWN_SUBWORDS, mean, np.inf))
    out[:, 2] = np.minimum(*evidence)
    return out


def pair_checks(src_counts: sp.csr_matrix, tgt_counts: sp.csr_matrix,
                languages: bool = True, symbols: Optional[Sequence[str]] = None,
                settings: Optional[PairCheckSettings] = None,
                texts: Optional[Tuple[Side, Side]] = None,
                langs: Tuple[str, str] = ("", "")) -> np.ndarray:
    """Every check of every pair: ``float32`` (pairs x 11), columns :data:`COLUMNS`
    (:func:`language_scores`, :func:`unrelated_p_value`, :func:`digit_scores`,
    :func:`.lexical.lexical_scores`, :func:`.scripts.script_scores`,
    :func:`.langid_check.langid_scores`); the columns of a check that did not run
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
        out[:, 7:9] = lexical_scores(src_counts, tgt_counts, joined=languages)
    return out


class FittedChecks:
    """What the checks learn from one corpus (:func:`fit_checks`), to score other pairs over
    the same vocabulary in batches: :func:`pair_checks` of a corpus is :meth:`score` of the
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
            out[:, 2] = unrelated_apply(self.lsi, src_counts, tgt_counts, sides)
            del sides
        if self.nb is not None:
            out[:, [0, 1, 3]] = language_apply(self.nb, src_counts, tgt_counts)
        elif self.languages and "language" in checks:  # fitted on no pairs
            out[:, [0, 1, 3]] = 0.0
        if self.symbols is not None:
            src_symbols, tgt_symbols = self.symbols
            if "digits" in checks:
                out[:, 4:7] = digit_scores(src_counts, tgt_counts, src_symbols, tgt_symbols)
            if "script" in checks:
                out[:, 9] = script_scores(src_counts, tgt_counts, src_symbols, tgt_symbols,
                                          joined=self.languages,
                                          rare_script=self.settings.rare_script,
                                          fitted=self.script)
        if "langid" in checks and texts is not None:
            out[:, 10] = langid_scores(*texts, *self.langs)
        return out

    def score(self, src_counts: sp.csr_matrix, tgt_counts: sp.csr_matrix,
              texts: Optional[Tuple[Side, Side]] = None) -> np.ndarray:
        """:func:`pair_checks`'s columns of these pairs (counts over the fitted vocabulary;
        *texts*: their sentences, for the langid check)."""
        return self._score(src_counts, tgt_counts, texts)


def _fit(src_counts, tgt_counts, languages, symbols, settings, langs):
    nb = lsi = script = lsi_sides = None
    if languages and "language" in settings.checks:
        _one_vocabulary(src_counts, tgt_counts)
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
    """The checks fitted on a corpus (arguments as :func:`pair_checks`), to score other pairs
    over the same vocabulary with :meth:`FittedChecks.score`.

    Raises:
        ValueError: *settings* name the lexical check (fitted and scored in one call).
    """
    settings = settings or PairCheckSettings()
    if "lexical" in settings.checks:
        raise ValueError("the lexical check is fitted and scored on one corpus in one call "
                         "(autoassist-features); leave it out of --pair-checks here")
    return _fit(src_counts, tgt_counts, languages, symbols, settings, langs)[0]
