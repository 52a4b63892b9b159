"""The langid check: is a side written in a language other than its own, a third one included?

The language check of :mod:`.columns` is fitted on the corpus, so it knows the corpus's
two languages only; a crawled side in Spanish, Italian or Polish on the English side of an
English-German pair has no class there (and shares the Latin script, so :mod:`.scripts` passes
it). This check asks a pretrained identifier of 140 languages, ``py3langid`` (a numpy fork of
langid.py, Lui & Baldwin 2012; its model ships inside the wheel, nothing is downloaded).

Invariant: a side is flagged only when, over the words it does not share with the other side,
the identifier scores some language other than the side's own above the side's own language
by more than the bar (:data:`LANGID_BAR`, nats of naive Bayes log-likelihood). The side is
read as a bag of those words: the identifier's byte n-gram counts of each word, walked on its
own between two spaces, summed (each distinct word of either side is walked once per batch
of :data:`_PAIRS` pairs; a clitic that a tokenizer split off, ``don 't``, is one word with
the word before it, as written: :func:`.words.rejoin_clitics`). Words found on both sides
(names, brands, codes, copied phrases) and words with digits are left out first, as the
other checks leave out shared subwords: a product line "Hostel Condado de Miranda" /
"Gästehaus Condado de Miranda" is judged on "Hostel" and "Gästehaus" alone. ``zxx`` (no
linguistic content) is no language and is not a candidate. A side's language that the
identifier does not know (or a code that names none) skips the check for that side, with a
log line, and never fails the build.

The bar is set on clean corpora, not on labelled noise: 7 nats, the lowest whole number at
which the union of the default checks flagged at most 1% of each clean corpus measured when
the check read the unshared words as one text (Tatoeba de-en, the corpus of the shortest
sentences, set it: 1.003% at 6, 0.93% at 7). Read as bags of words, the union flags 0.89% of
Tatoeba at 7 and 0.975% at 5; the bar stays at 7, away from the bound. This check alone flags
at most 0.24% of the pairs of Tatoeba, Multi30k and newstest at 7
(docs/results/paracrawl/README.md). The score of a pair is the
larger margin of its two sides (NaN: no side could be judged).
"""

import functools
import logging
import re
import unicodedata
from typing import List, Optional, Sequence

import numpy as np
from scipy import sparse

from .settings import LANGID_BAR  # noqa: F401  (the bar's home)
from .words import Pieces, Side, unshared_bags, word_ids

logger = logging.getLogger("autoassist_fairseq.features")

_NOT_LANGUAGES = ("zxx",)
# three-letter and other codes a fairseq corpus may carry, to the identifier's ISO 639-1
_ISO3 = {"eng": "en", "deu": "de", "ger": "de", "fra": "fr", "fre": "fr", "spa": "es",
         "ita": "it", "nld": "nl", "dut": "nl", "por": "pt", "pol": "pl", "ces": "cs",
         "cze": "cs", "rus": "ru", "ukr": "uk", "zho": "zh", "chi": "zh", "cmn": "zh",
         "jpn": "ja", "kor": "ko", "ara": "ar", "tur": "tr", "ron": "ro", "rum": "ro",
         "hun": "hu", "fin": "fi", "est": "et", "lav": "lv", "lit": "lt", "swe": "sv",
         "dan": "da", "nor": "no", "nob": "no", "ell": "el", "gre": "el", "bul": "bg",
         "hin": "hi", "vie": "vi", "ind": "id", "heb": "he", "fas": "fa", "per": "fa"}
_IDENTIFIER = None


def identifier():
    """The identifier (loaded once; about a second)."""
    global _IDENTIFIER
    if _IDENTIFIER is None:
        try:
            from py3langid.langid import MODEL_FILE, LanguageIdentifier
        except ImportError as err:  # setup.py installs it on Python >= 3.10 only
            raise ValueError("the langid check needs py3langid (Python >= 3.10): pip install "
                             "py3langid==0.4.0, or leave langid out of --pair-checks") from err
        _IDENTIFIER = LanguageIdentifier.from_model_file(MODEL_FILE)
    return _IDENTIFIER


def identifier_code(lang: str) -> Optional[str]:
    """The identifier's code of a corpus's language code (``en``, ``de_DE``, ``en_XX``,
    ``eng``, ``zh-Hans``); None when it knows no such language."""
    code = re.split(r"[_\-.]", lang.strip().lower())[0]
    code = _ISO3.get(code, code)
    return code if code in identifier().labels and code not in _NOT_LANGUAGES else None


class _Tables:
    """The identifier's model as numpy arrays, for walking its byte automaton over many texts
    at once: ``next_state[row_base[state] + byte]``, ``feature[state]`` (-1: none), and the
    naive Bayes tables ``ptc`` (feature x language, float32) and ``pc`` (language)."""

    def __init__(self, ident):
        self.next_state = np.frombuffer(ident.tk_nextmove,
                                        dtype=np.dtype(ident.tk_nextmove.typecode)).astype(np.int32)
        self.row_base = np.asarray(ident.tk_row, dtype=np.int32) << 8
        self.feature = np.asarray(ident.tk_output, dtype=np.int32)
        self.ptc = np.asarray(ident.nb_ptc, dtype=np.float32)
        self.pc = np.asarray(ident.nb_pc, dtype=np.float32)


@functools.lru_cache(maxsize=1)
def _tables() -> _Tables:
    return _Tables(identifier())


_CELLS = 1 << 22  # bytes x texts walked at once: bounds the two int32 work arrays at 16 MiB each


def _chunks(order: np.ndarray, lengths: np.ndarray):
    """Consecutive runs of *order* (text indices sorted by length) of at most :data:`_CELLS`
    bytes x texts each (a longer text alone)."""
    start = 0
    while start < len(order):
        stop = start + 1
        while stop < len(order) and (stop + 1 - start) * lengths[order[stop]] <= _CELLS:
            stop += 1
        yield order[start:stop]
        start = stop


def feature_counts(encoded: Sequence[bytes]) -> sparse.csr_matrix:
    """Per encoded text, the count of each of the identifier's byte n-gram features (texts x
    features, ``float32``), as py3langid's walk counts them. The texts are walked through the
    identifier's automaton together, one byte position at a time (sorted by length, so that
    the texts still walking are a suffix), instead of byte by byte in Python."""
    t = _tables()
    lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    order = np.argsort(lengths, kind="stable")
    rows_out, cols_out = [], []
    for rows in _chunks(order, lengths):
        length = lengths[rows]
        width = int(length[-1])
        if width == 0:
            continue
        # byte position major: each step reads and writes contiguous memory
        text_bytes = np.zeros((width, len(rows)), dtype=np.int32)
        text_bytes.T[np.arange(width)[None, :] < length[:, None]] = np.frombuffer(
            b"".join(encoded[i] for i in rows), dtype=np.uint8)
        features = np.full((width, len(rows)), -1, dtype=np.int32)
        state = np.zeros(len(rows), dtype=np.int32)
        first = 0  # the texts before it have ended
        for j in range(width):
            while length[first] <= j:
                first += 1
            state[first:] = t.next_state[t.row_base[state[first:]] + text_bytes[j, first:]]
            features[j, first:] = t.feature[state[first:]]
        col, row = np.nonzero(features >= 0)
        rows_out.append(rows[row])
        cols_out.append(features[col, row])
    row = np.concatenate(rows_out) if rows_out else np.zeros(0, dtype=np.int64)
    col = np.concatenate(cols_out) if cols_out else np.zeros(0, dtype=np.int32)
    counts = sparse.csr_matrix((np.ones(len(row), dtype=np.float32), (row, col)),
                               shape=(len(encoded), t.ptc.shape[0]))
    counts.sum_duplicates()
    return counts


def naive_bayes_scores(counts: sparse.csr_matrix) -> np.ndarray:
    """py3langid's raw score of every language from feature counts (log1p of each count
    times the feature's log-probability, plus the prior); a row of NaN without features."""
    t = _tables()
    counts = counts.tocsr(copy=True)
    counts.data = np.log1p(counts.data)
    out = np.asarray(counts @ t.ptc, dtype=np.float32)
    out += t.pc
    out[np.diff(counts.indptr) == 0] = np.nan
    return out


def _margins(scores: np.ndarray, own: str) -> np.ndarray:
    """Per row of raw scores, the best score of a language other than *own* less *own*'s
    (nats); NaN for a row without features. *scores* is overwritten (a copy of all but two
    columns would cost more than the rest of the check)."""
    classes = list(identifier().nb_classes)
    mine = [i for i, c in enumerate(classes) if c == own]
    not_others = [i for i, c in enumerate(classes) if c == own or c in _NOT_LANGUAGES]
    own_score = scores[:, mine].max(axis=1)
    scores[:, not_others] = -np.inf
    return (scores.max(axis=1) - own_score).astype(np.float32)


def _upper_sentences(upper: np.ndarray, lower: np.ndarray, sentence: np.ndarray,
                     ids: np.ndarray, n: int) -> np.ndarray:
    """Per sentence, whether its words joined are upper case (``str.isupper``: a cased
    letter, and no lower-case one), which the identifier lowers before it reads a text;
    *upper*, *lower*: per word, whether it is upper case and whether it has a lower-case
    letter."""
    return (np.bincount(sentence, weights=upper[ids], minlength=n) > 0) & \
        (np.bincount(sentence, weights=lower[ids], minlength=n) == 0)


def _bag_features(vocabulary: dict, bags, n: int):
    """The feature counts of *n* sentences of each side from their bags of words
    (:func:`.words.unshared_bags`), as a product: each side's words of each sentence (a
    sparse matrix, sentences x words read) and the words' feature counts (words read x
    features). Each word of either side is walked once, on its own between two spaces, and a
    sentence's feature counts are the sum of its words'. (A text of the unshared words joined
    would also count the n-grams across two words that the left-out words had separated,
    which the sentence never held.)"""
    words = list(vocabulary)
    upper = np.fromiter(map(str.isupper, words), dtype=bool, count=len(words))
    # a lower-case letter: with a cased letter added, not upper case (also for "ª", which
    # has no upper-case form)
    lower = np.fromiter((not (w + "A").isupper() for w in words), dtype=bool, count=len(words))
    read = []
    for sentence, ids in bags:
        lowered = _upper_sentences(upper, lower, sentence, ids, n)[sentence]
        if lowered.any():  # the identifier reads an upper-case text in lower case
            ids = ids.copy()
            ids[lowered] = word_ids([words[i].lower() for i in ids[lowered]], vocabulary)
        read.append((sentence, ids))
    words = list(vocabulary)
    used = np.flatnonzero(sum(np.bincount(ids, minlength=len(words)) for _, ids in read))
    column = np.zeros(len(words), dtype=np.int64)
    column[used] = np.arange(len(used))
    counts = feature_counts([unicodedata.normalize("NFC", f" {words[i]} ").encode(
        "utf8", "surrogatepass") for i in used])
    return [sparse.csr_matrix((np.ones(len(ids), dtype=np.float32), (sentence, column[ids])),
                              shape=(n, len(used))) for sentence, ids in read], counts


def _bag_scores(vocabulary: dict, bags, n: int) -> List[np.ndarray]:
    """Raw scores of *n* sentences of each side from their bags of words (see
    :func:`_bag_features`)."""
    sides, counts = _bag_features(vocabulary, bags, n)
    return [naive_bayes_scores(side @ counts) for side in sides]


_ROWS = 16384  # sentences whose raw scores (sentences x languages) are taken at a time


def side_margins(vocabulary: dict, bags, owns: Sequence[Optional[str]], n: int):
    """Per side of :func:`.words.unshared_bags`'s *bags*, its sentences' margins
    (:func:`_margins` of :func:`_bag_scores`) against its identifier code in *owns*; None for
    a side whose code is None (a language the identifier does not know). The raw scores are
    taken :data:`_ROWS` sentences at a time (each sentence's own: the same numbers), so that
    their memory is a few MB however many sentences come."""
    known = [(bag, own) for bag, own in zip(bags, owns) if own is not None]
    sides, counts = _bag_features(vocabulary, [bag for bag, _ in known], n)
    sides = iter(sides)
    out = []
    for own in owns:
        if own is None:
            out.append(None)
            continue
        side = next(sides)
        margins = np.empty(n, dtype=np.float32)
        for start in range(0, n, _ROWS):
            margins[start:start + _ROWS] = _margins(
                naive_bayes_scores(side[start:start + _ROWS] @ counts), own)
        out.append(margins)
    return out


_PAIRS = 250_000  # pairs scored at once: bounds the word arrays of a large corpus


def _rows(side: Side, start: int, stop: int) -> Side:
    return side.rows(start, stop) if isinstance(side, Pieces) else side[start:stop]


def langid_scores(src: Side, tgt: Side, src_lang: str, tgt_lang: str) -> np.ndarray:
    """Per pair (``float32``), the larger of its two sides' margins (:func:`side_margins` of
    the words of :func:`.words.unshared_bags`); a side whose language the identifier does not
    know is skipped (logged), and all NaN when neither is known. Each side: its texts, or its
    subword :class:`.words.Pieces`."""
    if len(src) != len(tgt):
        raise ValueError(f"langid check: {len(src)} source sentences against "
                         f"{len(tgt)} target sentences")
    out = np.full(len(src), np.nan, dtype=np.float32)
    owns = [identifier_code(lang or "") for lang in (src_lang, tgt_lang)]
    for lang, own in zip((src_lang, tgt_lang), owns):
        if own is None:
            logger.info(f"langid check: the identifier knows no language {lang!r}; that side "
                        "is not checked (known: ISO 639-1 codes such as en, de, es)")
    if owns == [None, None]:
        return out
    for start in range(0, len(src), _PAIRS):
        stop = min(start + _PAIRS, len(src))
        vocabulary, bags = unshared_bags(_rows(src, start, stop), _rows(tgt, start, stop))
        for margins in side_margins(vocabulary, bags, owns, stop - start):
            if margins is not None:
                out[start:stop] = np.fmax(out[start:stop], margins)
    return out
