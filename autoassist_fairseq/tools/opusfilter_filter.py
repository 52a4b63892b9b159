"""The pair checks as an OpusFilter filter (https://github.com/Helsinki-NLP/OpusFilter).

In an OpusFilter configuration::

    steps:
      - type: filter
        parameters:
          inputs: [corpus.en.gz, corpus.de.gz]
          outputs: [clean.en.gz, clean.de.gz]
          filters:
            - AutoAssistPairChecks:
                languages: [en, de]
              module: autoassist_fairseq.tools.opusfilter_filter

The checks learn from the pairs they check (:mod:`.pair_scorer`): each chunk of *chunksize*
pairs is fitted on itself and scored (a last chunk under *min_fit* pairs is scored by the
previous chunk's fit); the sentencepiece model (given as *spm_model*, or trained on the first
chunk, *bpe_size* pieces) serves every chunk. A pair's score (``score`` steps) is a dict:
``flag`` (1: some check flags it), ``union`` (the union's score, ranking pairs within their
chunk) and one score per check that runs; :meth:`AutoAssistPairChecks.accept` keeps the
pairs whose ``flag`` is 0.

Requires ``pip install autoassist-fairseq[opusfilter]``.
"""

import logging
from itertools import islice
from typing import Iterable, Iterator, Optional, Sequence

import numpy as np
import opusfilter

from ..checks.settings import PairCheckSettings
from .pair_scorer import BPE_SIZE, FIT_PAIRS, PairScorer

logger = logging.getLogger("autoassist_fairseq.opusfilter_filter")


class AutoAssistPairChecks(opusfilter.FilterABC):
    """Flags a pair with a side in the wrong language, unrelated sides, differing numbers or
    a side in a foreign script (the default checks of ``autoassist-features``).

    Args:
        languages (list of str): the source and target language codes, e.g. ``[en, de]``.
        checks (list of str, optional): the checks to run (default: the defaults of
            ``autoassist-features``; not ``lexical``).
        spm_model (str, optional): a sentencepiece model (default: a joint BPE model of
            *bpe_size* pieces trained on the first chunk).
        bpe_size (int): see *spm_model* (default: 8000).
        chunksize (int): pairs fitted and scored together (default: 200000).
        min_fit (int): a chunk of fewer pairs is scored by the previous chunk's fit
            (default: 1000).
        threads (int): sentencepiece threads (default: 1).
    """

    def __init__(self, languages: Sequence[str], checks: Optional[Sequence[str]] = None,
                 spm_model: Optional[str] = None, bpe_size: int = BPE_SIZE,
                 chunksize: int = FIT_PAIRS, min_fit: int = 1000, threads: int = 1, **kwargs):
        super().__init__(**kwargs)
        if len(languages) != 2:
            raise opusfilter.ConfigurationError(
                f"AutoAssistPairChecks: languages must name the two sides, e.g. [en, de] (got "
                f"{list(languages)})")
        if chunksize < 2 or min_fit < 2:
            raise opusfilter.ConfigurationError(
                f"AutoAssistPairChecks: chunksize and min_fit must be at least 2 (got "
                f"{chunksize}, {min_fit})")
        try:
            self.settings = PairCheckSettings() if checks is None else \
                PairCheckSettings(checks=tuple(checks))
        except ValueError as err:
            raise opusfilter.ConfigurationError(f"AutoAssistPairChecks: {err}") from None
        if "lexical" in self.settings.checks:
            raise opusfilter.ConfigurationError(
                "AutoAssistPairChecks: the lexical check is not offered on raw text; leave it "
                "out of checks")
        self.languages = list(languages)
        self.spm_model, self.bpe_size = spm_model, bpe_size
        self.chunksize, self.min_fit, self.threads = chunksize, min_fit, threads
        self._sp = None

    @property
    def score_direction(self):
        return opusfilter.CLEAN_FALSE  # of the score's "flag"

    def _scorer(self, chunk) -> PairScorer:
        scorer = PairScorer(chunk, *self.languages, self.settings,
                            self._sp if self._sp is not None else self.spm_model,
                            self.bpe_size, self.threads, keep_pieces=True)
        self._sp = scorer.sp  # one sentencepiece model for every chunk
        return scorer

    def _scored(self, pairs: Iterable):
        """(pair, score) of every pair, chunk by chunk."""
        pairs = iter(pairs)
        scorer = None
        for chunk in iter(lambda: list(islice(pairs, self.chunksize)), []):
            if scorer is None or len(chunk) >= self.min_fit:
                if len(chunk) < 2:
                    logger.warning("AutoAssistPairChecks: a single pair cannot be checked "
                                   "(the checks learn from the pairs); it is kept")
                    yield chunk[0], {"flag": 0, "union": 0.0}
                    continue
                scorer = self._scorer([(pair[0], pair[1]) for pair in chunk])
                fit_rows = np.arange(len(chunk))  # fitted on this chunk: its pieces kept
            else:
                fit_rows = None
            scored = scorer.score([pair[0] for pair in chunk], [pair[1] for pair in chunk],
                                  fit_rows)
            for i, pair in enumerate(chunk):
                out = {"flag": int(scored.flags[i]), "union": float(scored.union[i])}
                out.update((name, float(s[i])) for name, s in scored.scores.items())
                yield pair, out

    def score(self, pairs: Iterable) -> Iterator[dict]:
        for _, score in self._scored(pairs):
            yield score

    def accept(self, score) -> bool:
        return not score["flag"]

    # OpusFilter's default filter()/filterfalse() score one pair at a time; the checks
    # learn from many pairs, so they score whole chunks
    def filter(self, pairs):
        for pair, score in self._scored(pairs):
            if self.accept(score):
                yield pair

    def filterfalse(self, pairs):
        for pair, score in self._scored(pairs):
            if not self.accept(score):
                yield pair
