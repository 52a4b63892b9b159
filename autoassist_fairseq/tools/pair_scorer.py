"""The pair checks on raw text: sentencepiece pieces, the checks fitted on a sample, batches
scored.

:class:`PairScorer` is what ``autoassist-score-pairs``, the OpusFilter filter and the
OpusCleaner filter share. It turns raw sentence pairs into what ``autoassist-features``
gives the checks: each side encoded with one joint sentencepiece model (trained on the fit
sample, as ``scripts/prepare-corpus.sh`` trains it, unless a model is given), the pieces
counted over one vocabulary in the order :func:`.check_report.joined_counts` builds
it (what ``fairseq-preprocess --joined-dictionary`` binarises, up to the order of its ids).
The checks are fitted once on the fit sample (:func:`..features.pair_checks.fit_checks`) and
score any number of batches over that vocabulary; a piece the sample lacks is left out of the
counts, as fairseq's ``<unk>`` carries no column weight, and kept in the text that the langid
check reads.

Scored on the sample itself, in one batch, the checks' columns are those of
:func:`..features.pair_checks.pair_checks` on the same pieces, bit for bit; in several
batches, equal up to the float32 rounding of the langid check's sums (whose order depends on
the batch). The union's continuous score (:func:`..features.pair_checks.union_score`)
standardises each check's score over its batch: it ranks pairs within a batch; the flags do
not depend on the batch.
"""

import contextlib
import gzip
import os
import random
import sys
import tempfile
from dataclasses import dataclass
from typing import Iterator, List, Optional, Sequence, Tuple

import numpy as np

from ..features.check_settings import CHECKS
from ..features.pair_checks import PairCheckSettings, check_scores, fit_checks, union_score
from ..features.tfidf import count_matrix
from ..features.words import Pieces
from ..prepare.spm_train_encode import LINE_BREAKS
from .check_report import joined_counts

FIT_PAIRS = 200_000  # pairs the checks (and a sentencepiece model) are fitted on
BATCH_PAIRS = 200_000  # pairs scored at once: memory stays bounded on any input
BPE_SIZE = 8000  # scripts/prepare-corpus.sh's joint sentencepiece vocabulary


class InputError(ValueError):
    """Input that is not tab-separated sentence pairs (its message names the line)."""


def open_text(path: str, mode: str = "r"):
    """A text file, plain or gzip (by its ``.gz`` suffix); ``-``: stdin or stdout."""
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


def read_pairs(lines, name: str) -> Iterator[Tuple[str, str]]:
    """(source, target) of each line ``SOURCE<tab>TARGET`` (its line end dropped).

    Raises:
        InputError: a line without exactly one tab, named by its number.
    """
    for number, line in enumerate(lines, 1):
        line = line.rstrip("\n")
        if line.count("\t") != 1:
            raise InputError(
                f"{name}, line {number}: {line.count(chr(9))} tabs; each line must be one "
                "pair, SOURCE<tab>TARGET (exactly one tab; replace tabs inside a sentence "
                "by spaces, e.g. paste the two sides of a corpus: paste corpus.en corpus.de)")
        src, tgt = line.split("\t")
        yield src, tgt


def sample_pairs(pairs, size: int, seed: int = 0, keep=None) -> Tuple[List[Tuple[str, str]],
                                                                        int]:
    """A uniform sample of at most *size* pairs (reservoir sampling, seeded), in input order
    while the input has no more than *size* pairs (then it is the input); *keep*: a callable
    that also receives every pair (to spool the input). Returns (sample, pairs read)."""
    rng = random.Random(seed)
    sample: List[Tuple[str, str]] = []
    n = 0
    for n, pair in enumerate(pairs, 1):
        if keep is not None:
            keep(pair)
        if len(sample) < size:
            sample.append(pair)
        else:
            j = rng.randrange(n)
            if j < size:
                sample[j] = pair
    return sample, n


def train_sentencepiece(sources: Sequence[str], targets: Sequence[str], vocab_size: int,
                        threads: int = 1):
    """A joint sentencepiece BPE model of both sides, trained as
    :mod:`..prepare.spm_train_encode` trains it (its defaults), as a processor."""
    import sentencepiece as spm

    with tempfile.TemporaryDirectory() as workdir:
        files = []
        for side, lines in (("src", sources), ("tgt", targets)):
            path = os.path.join(workdir, f"train.{side}")
            with open(path, "w", encoding="utf-8", newline="\n") as f:
                f.writelines(line.translate(LINE_BREAKS) + "\n" for line in lines)
            files.append(path)
        prefix = os.path.join(workdir, "spm")
        try:
            spm.SentencePieceTrainer.train(
                input=",".join(files), model_prefix=prefix, vocab_size=vocab_size,
                model_type="bpe", character_coverage=0.9999, hard_vocab_limit=False,
                input_sentence_size=2_000_000, shuffle_input_sentence=True,
                num_threads=threads, bos_id=-1, eos_id=-1, unk_id=0, pad_id=-1, minloglevel=2)
        except RuntimeError as err:
            raise ValueError(f"sentencepiece could not train a vocabulary of {vocab_size} "
                             f"pieces on the fit sample ({err}); give a smaller --bpe-size, "
                             "more pairs to fit on, or a model (--spm-model)") from None
        return spm.SentencePieceProcessor(model_file=prefix + ".model")


def load_sentencepiece(path: str):
    import sentencepiece as spm

    if not os.path.isfile(path):
        raise FileNotFoundError(f"sentencepiece model not found: {path}")
    try:
        return spm.SentencePieceProcessor(model_file=path)
    except (RuntimeError, OSError) as err:
        raise ValueError(f"{path} is not a sentencepiece model ({err})") from None


@dataclass
class ScoredBatch:
    """One batch's scores: per check that ran, its continuous score (higher: more likely
    noise), the union's score and whether any check flags the pair."""
    scores: dict
    union: np.ndarray
    flags: np.ndarray


class PairScorer:
    """The pair checks fitted on a sample of raw pairs, to score batches of raw pairs.

    Args:
        sample (list of (str, str)): the pairs to fit on (at least 2).
        src, tgt (str): the language codes of the two sides (the langid check's).
        settings (PairCheckSettings, optional): the checks and their bars (default: the
            defaults of ``autoassist-features``; not the lexical check).
        spm_model (str or SentencePieceProcessor, optional): a sentencepiece model to
            encode with (default: one trained on *sample*, *bpe_size* pieces; ``sp``).
        threads (int): sentencepiece threads (default: 1).
    """

    def __init__(self, sample: Sequence[Tuple[str, str]], src: str, tgt: str,
                 settings: Optional[PairCheckSettings] = None, spm_model=None,
                 bpe_size: int = BPE_SIZE, threads: int = 1):
        self.settings = settings or PairCheckSettings()
        if "lexical" in self.settings.checks:
            raise ValueError("the lexical check is fitted and scored in one call on a prepared "
                             "corpus (autoassist-features); leave it out of --pair-checks")
        if len(sample) < 2:
            raise ValueError(f"{len(sample)} pair(s) to fit the checks on; they need at least 2 "
                             "(and are meant for thousands)")
        self.threads = threads
        sources, targets = [s for s, _ in sample], [t for _, t in sample]
        if spm_model is None:
            self.sp = train_sentencepiece(sources, targets, bpe_size, threads)
        else:
            self.sp = load_sentencepiece(spm_model) if isinstance(spm_model, str) else spm_model
        counts, self.symbols, _ = joined_counts(self.encode(sources), self.encode(targets))
        self.vocab = {s: i for i, s in enumerate(self.symbols)}
        self.fitted = fit_checks(*counts, symbols=self.symbols, settings=self.settings,
                                 langs=(src, tgt))
        # the columns that check_scores gives for these settings, in CHECKS' order
        self.names = [c for c in CHECKS if c in self.settings.checks]

    def encode(self, texts: Sequence[str]) -> List[List[str]]:
        """Each text's sentencepiece pieces (as :mod:`..prepare.spm_train_encode`
        encodes it)."""
        return self.sp.encode([t.translate(LINE_BREAKS) for t in texts], out_type=str,
                              num_threads=self.threads)

    def _side(self, pieces: List[List[str]], extra: dict):
        """A side's counts over the fitted vocabulary and its :class:`Pieces` (a piece the
        vocabulary lacks: an id in *extra*, past the vocabulary; no column of the counts)."""
        size = len(self.vocab)
        get = self.vocab.get
        flat = [p for sentence in pieces for p in sentence]
        ids = np.fromiter((get(p, -1) for p in flat), dtype=np.int64, count=len(flat))
        offsets = np.zeros(len(pieces) + 1, dtype=np.int64)
        np.cumsum([len(s) for s in pieces], out=offsets[1:])
        unknown = np.flatnonzero(ids < 0)
        for i in unknown:
            ids[i] = size + extra.setdefault(flat[i], len(extra))
        counts = count_matrix(np.minimum(ids, size), offsets, size + 1)[:, :size]
        return counts, ids, offsets

    def score(self, sources: Sequence[str], targets: Sequence[str]) -> ScoredBatch:
        """The checks' scores, the union's score and the flags of a batch of pairs."""
        extra: dict = {}
        (src_counts, src_ids, src_off), (tgt_counts, tgt_ids, tgt_off) = (
            self._side(self.encode(side), extra) for side in (sources, targets))
        symbols = self.symbols + list(extra) if extra else self.symbols
        texts = (Pieces(src_ids, src_off, symbols), Pieces(tgt_ids, tgt_off, symbols))
        checks = self.fitted.score(src_counts, tgt_counts, texts=texts)
        per_check, margin = check_scores(checks, self.settings)
        flags = np.zeros(len(checks), dtype=bool)
        for _, f in per_check.values():
            flags |= f
        scores = {name: np.asarray(per_check[name][0], dtype=np.float64) if name in per_check
                  else np.full(len(checks), np.nan) for name in self.names}
        return ScoredBatch(scores, union_score(per_check, margin), flags)
