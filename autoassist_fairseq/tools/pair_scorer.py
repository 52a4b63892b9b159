"""The pair checks on raw text: sentencepiece pieces, the checks fitted on a sample, batches
scored.

:class:`PairScorer` is what ``autoassist-score-pairs``, the OpusFilter filter and the
OpusCleaner filter share. It turns raw sentence pairs into what ``autoassist-features``
gives the checks: each side encoded with one joint sentencepiece model (trained on the fit
sample, as ``scripts/prepare-corpus.sh`` trains it, unless a model is given:
:mod:`.sentencepiece_model`), the pieces counted over one vocabulary in the order
:func:`.mix_preparation.joined_counts` builds it (what ``fairseq-preprocess
--joined-dictionary`` binarises, up to the order of its ids).
The checks are fitted once on the fit sample (:func:`..checks.columns.fit_checks`) and
score any number of batches over that vocabulary; a piece the sample lacks is left out of the
counts, as fairseq's ``<unk>`` carries no column weight, and kept in the text that the langid
check reads.

Scored on the sample itself, in one batch, the checks' columns are those of
:func:`..checks.columns.pair_check_columns` on the same pieces, bit for bit; in several
batches, equal up to the float32 rounding of the langid check's sums (whose order depends on
the batch). The union's continuous score (:func:`..checks.columns.union_score`)
standardises each check's score over its batch: it ranks pairs within a batch; the flags do
not depend on the batch.
"""

from dataclasses import dataclass
from itertools import chain
from typing import List, Optional, Sequence, Tuple

import numpy as np

from ..checks.settings import CHECKS
from ..checks.columns import PairCheckSettings, check_scores, fit_checks, union_score
from ..features.tfidf import count_matrix
from ..checks.words import Pieces
from .sentencepiece_model import load_sentencepiece, one_line, train_sentencepiece

FIT_PAIRS = 200_000  # pairs the checks (and a sentencepiece model) are fitted on
BATCH_PAIRS = 200_000  # pairs scored at once: memory stays bounded on any input
BPE_SIZE = 8000  # scripts/prepare-corpus.sh's joint sentencepiece vocabulary
_SPM = "\u2581"  # sentencepiece's word boundary


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
        keep_pieces (bool): keep the sample's pieces, so that :meth:`score` takes the pairs
            of the sample from them (its *fit_rows*) instead of encoding them again.

    Each line is encoded to piece ids once; a piece is known by its text (the vocabulary's
    symbols are texts), so a piece that sentencepiece encodes as unknown (its id is the
    model's ``<unk>``) is known by the text sentencepiece gives it (``out_type=str``).
    """

    def __init__(self, sample: Sequence[Tuple[str, str]], src: str, tgt: str,
                 settings: Optional[PairCheckSettings] = None, spm_model=None,
                 bpe_size: int = BPE_SIZE, threads: int = 1, keep_pieces: bool = False):
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
        # the text of each piece id: the model's pieces, then the texts of unknown pieces met
        self._texts = [self.sp.id_to_piece(i) for i in range(self.sp.get_piece_size())]
        self._unknown_ids: dict = {}  # text of an unknown piece -> its id (past the model's)
        self._unk = self.sp.unk_id()
        # a BPE model trained here (whitespace splits words) whose pieces hold no word
        # boundary but at their start: a text's pieces are those of its words (see _by_words)
        self._words = spm_model is None and self.sp.piece_to_id(_SPM) != self._unk and \
            not any(_SPM in piece[1:] for piece in self._texts)
        sides = [self._encode_ids(sources), self._encode_ids(targets)]
        del sources, targets
        # the vocabulary of joined_counts: the pieces in order of first appearance, source
        # side first
        ids = np.concatenate([sides[0][0], sides[1][0]])
        seen, first = np.unique(ids, return_index=True)
        order = seen[np.argsort(first, kind="stable")]
        self.symbols = [self._texts[i] for i in order]
        self.vocab = {s: i for i, s in enumerate(self.symbols)}
        self._lookup = np.full(len(self._texts), -1, dtype=np.int64)  # piece id -> column
        self._lookup[order] = np.arange(len(order))
        counts = [count_matrix(self._lookup[i], offsets, len(order)) for i, offsets in sides]
        self._fit_pieces = ([(i.astype(np.int32), o) for i, o in sides] if keep_pieces
                            else None)
        del ids, sides
        self.fitted = fit_checks(*counts, symbols=self.symbols, settings=self.settings,
                                 langs=(src, tgt))
        # the columns that check_scores gives for these settings, in CHECKS' order
        self.names = [c for c in CHECKS if c in self.settings.checks]

    def encode(self, texts: Sequence[str]) -> List[List[str]]:
        """Each text's sentencepiece pieces (as :mod:`..prepare.spm_train_encode`
        encodes it)."""
        return self.sp.encode(one_line(texts), out_type=str, num_threads=self.threads)

    def _encode_ids(self, texts: Sequence[str]) -> Tuple[np.ndarray, np.ndarray]:
        """All pieces of *texts* (their ids: one per piece text, see the class), text after
        text, and the ``len(texts) + 1`` offsets of each text's pieces."""
        texts = one_line(texts)
        if self._words:
            found = self._by_words(texts)
            if found is not None:
                return found
        encoded = self.sp.encode(texts, out_type=int, num_threads=self.threads)
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)),
                  out=offsets[1:])
        ids = np.fromiter(chain.from_iterable(encoded), dtype=np.int64, count=int(offsets[-1]))
        del encoded
        unknown = np.flatnonzero(ids == self._unk)
        if unknown.size:
            rows = np.unique(np.searchsorted(offsets, unknown, side="right") - 1)
            for row, pieces in zip(rows, self.encode([texts[r] for r in rows])):
                a, b = int(offsets[row]), int(offsets[row + 1])
                if len(pieces) != b - a:  # sentencepiece segments a text one way
                    raise RuntimeError("sentencepiece gave pieces and ids of different lengths")
                for j in np.flatnonzero(ids[a:b] == self._unk):
                    ids[a + j] = self._text_id(pieces[j])
        return ids, offsets

    def _by_words(self, texts: List[str]) -> Optional[Tuple[np.ndarray, np.ndarray]]:
        """:meth:`_encode_ids` of *texts* (one line each) from their words: each distinct
        space-separated word is encoded once (a corpus repeats its words: Tatoeba's 2.1M
        words are 82k distinct ones). None where that may differ from encoding the texts.

        The pieces are the same: sentencepiece encodes a text's normalised form, and a BPE
        merge never joins two pieces across a word boundary ``▁`` (no piece holds one past
        its start, and ``▁`` alone is a piece: a run of unknown pieces, which sentencepiece
        merges into one, never crosses it either), so where the texts' normalised forms are
        those of their words put together, each starting with ``▁`` (checked here on the
        texts: the normaliser's rules are the model's), the pieces of a text are its words'
        pieces, one word after another."""
        joined = "\n".join(texts)
        if not texts or joined.count("\n") != len(texts) - 1:  # a text holds a line break
            return None
        tokens = joined.replace("\n", " \n ").split(" ")  # "\n": a text ends
        del joined
        index = dict.fromkeys(tokens)
        words = list(index)
        index.update(zip(words, range(len(words))))
        token = np.fromiter(map(index.__getitem__, tokens), dtype=np.int64, count=len(tokens))
        end = index.get("\n", -1)
        del tokens, index
        if end >= 0:
            words[end] = ""
        normal = self.sp.normalize(words)
        if any(n and not n.startswith(_SPM) for n in normal):
            return None
        if end >= 0:
            normal[end] = "\n"
        if "".join(np.asarray(normal, dtype=object)[token].tolist()) != \
                "\n".join(self.sp.normalize(texts)):
            return None
        del normal
        encoded = self.sp.encode(words, out_type=int, num_threads=self.threads)
        unknown = [i for i, e in enumerate(encoded) if self._unk in e]
        for i, pieces in zip(unknown, self.encode([words[i] for i in unknown])):
            if len(pieces) != len(encoded[i]):  # sentencepiece segments a text one way
                raise RuntimeError("sentencepiece gave pieces and ids of different lengths")
            encoded[i] = [self._text_id(p) if j == self._unk else j
                          for j, p in zip(encoded[i], pieces)]
        lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
        pieces = np.fromiter(chain.from_iterable(encoded), dtype=np.int64,
                             count=int(lengths.sum()))
        del encoded
        n = lengths[token]
        ends = np.cumsum(n)
        within = np.arange(int(ends[-1])) - np.repeat(ends - n, n)
        ids = pieces[np.repeat((np.cumsum(lengths) - lengths)[token], n) + within]
        offsets = np.zeros(len(texts) + 1, dtype=np.int64)
        offsets[1:-1] = ends[token == end]
        offsets[-1] = ends[-1]
        return ids, offsets

    def _text_id(self, text: str) -> int:
        """The id of a piece's text (the model's id where the text is one of its pieces)."""
        i = self.sp.piece_to_id(text)
        if i != self._unk or text == self._texts[self._unk]:
            return i
        if text not in self._unknown_ids:
            self._unknown_ids[text] = len(self._texts)
            self._texts.append(text)
        return self._unknown_ids[text]

    def _side_ids(self, texts: Sequence[str], side: int, fit_rows) -> Tuple[np.ndarray,
                                                                            np.ndarray]:
        """:meth:`_encode_ids` of a side of a batch, whose texts at ``fit_rows >= 0`` are
        those rows of the fit sample (their pieces kept, not encoded again)."""
        if fit_rows is None or self._fit_pieces is None:
            return self._encode_ids(texts)
        rows = np.asarray(fit_rows, dtype=np.int64)
        if len(rows) != len(texts):
            raise ValueError(f"{len(rows)} fit rows for {len(texts)} pairs")
        fresh = np.flatnonzero(rows < 0)
        kept = np.flatnonzero(rows >= 0)
        fit_ids, fit_offsets = self._fit_pieces[side]
        new_ids, new_offsets = self._encode_ids([texts[i] for i in fresh])
        lengths = np.zeros(len(rows), dtype=np.int64)
        lengths[fresh] = np.diff(new_offsets)
        lengths[kept] = fit_offsets[rows[kept] + 1] - fit_offsets[rows[kept]]
        offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        ids = np.empty(int(offsets[-1]), dtype=np.int64)
        for lines, starts, source in ((fresh, new_offsets[:-1], new_ids),
                                      (kept, fit_offsets[rows[kept]], fit_ids)):
            n = lengths[lines]
            total = int(n.sum())
            if not total:
                continue
            within = np.arange(total) - np.repeat(np.cumsum(n) - n, n)
            ids[np.repeat(offsets[lines], n) + within] = source[np.repeat(starts, n) + within]
        return ids, offsets

    def _side(self, ids: np.ndarray, offsets: np.ndarray, extra: dict):
        """A side's counts over the fitted vocabulary and its column ids (a piece the
        vocabulary lacks: its column in *extra* (piece id -> column past the vocabulary,
        filled in order of first appearance); no column of the counts)."""
        size = len(self.vocab)
        lookup = self._lookup
        if len(lookup) < len(self._texts):  # unknown pieces met since
            lookup = self._lookup = np.concatenate(
                [lookup, np.full(len(self._texts) - len(lookup), -1, dtype=np.int64)])
        columns = lookup[ids]
        unknown = np.flatnonzero(columns < 0)
        if unknown.size:
            seen, first = np.unique(ids[unknown], return_index=True)
            for i in seen[np.argsort(first, kind="stable")]:
                extra.setdefault(int(i), size + len(extra))
            columns[unknown] = [extra[i] for i in ids[unknown].tolist()]
        counts = count_matrix(np.minimum(columns, size), offsets, size + 1)[:, :size]
        return counts, columns, offsets

    def score(self, sources: Sequence[str], targets: Sequence[str],
              fit_rows: Optional[Sequence[int]] = None) -> ScoredBatch:
        """The checks' scores, the union's score and the flags of a batch of pairs.

        *fit_rows*: per pair, its row in the fit sample (its pieces kept: ``keep_pieces``),
        or -1 (encoded here); the scores are those of the pairs encoded anew."""
        extra: dict = {}
        (src_counts, src_ids, src_off), (tgt_counts, tgt_ids, tgt_off) = (
            self._side(*self._side_ids(texts, side, fit_rows), extra)
            for side, texts in enumerate((sources, targets)))
        symbols = self.symbols + [self._texts[i] for i in extra] if extra else self.symbols
        texts = (Pieces(src_ids, src_off, symbols), Pieces(tgt_ids, tgt_off, symbols))
        checks = self.fitted.score(src_counts, tgt_counts, texts=texts)
        per_check, margin = check_scores(checks, self.settings)
        flags = np.zeros(len(checks), dtype=bool)
        for _, f in per_check.values():
            flags |= f
        scores = {name: np.asarray(per_check[name][0], dtype=np.float64) if name in per_check
                  else np.full(len(checks), np.nan) for name in self.names}
        return ScoredBatch(scores, union_score(per_check, margin), flags)
