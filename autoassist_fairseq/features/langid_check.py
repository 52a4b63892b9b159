"""The langid check: is a side written in a language other than its own, a third one included?

The language check of :mod:`.pair_checks` is fitted on the corpus, so it knows the corpus's
two languages only; a crawled side in Spanish, Italian or Polish on the English side of an
English-German pair has no class there (and shares the Latin script, so :mod:`.scripts` passes
it). This check asks a pretrained identifier of 140 languages, ``py3langid`` (a numpy fork of
langid.py, Lui & Baldwin 2012; its model ships inside the wheel, nothing is downloaded).

Invariant: a side is flagged only when, over the words it does not share with the other side,
the identifier scores some language other than the side's own above the side's own language
by more than the bar (:data:`LANGID_BAR`, nats of naive Bayes log-likelihood). Words found on
both sides (names, brands, codes, copied phrases) and words with digits are left out first,
as the other checks leave out shared subwords: a product line "Hostel Condado de Miranda" /
"Gästehaus Condado de Miranda" is judged on "Hostel" and "Gästehaus" alone. ``zxx`` (no
linguistic content) is no language and is not a candidate. A side's language that the
identifier does not know (or a code that names none) skips the check for that side, with a
log line, and never fails the build.

The bar is set on clean corpora, not on labelled noise: it is the lowest whole number of nats
at which the union of the default checks flags at most 1% of each clean corpus measured
(Tatoeba de-en, the corpus of the shortest sentences, sets it: at 6 nats the union flags
1.003% of it, at 7 nats 0.93%; this check alone flags at most 0.2% of the pairs of Tatoeba,
Multi30k and newstest at 7; docs/results/paracrawl/README.md). The score of a pair is the
larger margin of its two sides (NaN: no side could be judged).
"""

import functools
import logging
import re
from typing import List, Optional, Sequence, Tuple

import numpy as np
from scipy import sparse

logger = logging.getLogger("autoassist_fairseq.features")

LANGID_BAR = 7.0
_NOT_LANGUAGES = ("zxx",)
# three-letter and other codes a fairseq corpus may carry, to the identifier's ISO 639-1
_ISO3 = {"eng": "en", "deu": "de", "ger": "de", "fra": "fr", "fre": "fr", "spa": "es",
         "ita": "it", "nld": "nl", "dut": "nl", "por": "pt", "pol": "pl", "ces": "cs",
         "cze": "cs", "rus": "ru", "ukr": "uk", "zho": "zh", "chi": "zh", "cmn": "zh",
         "jpn": "ja", "kor": "ko", "ara": "ar", "tur": "tr", "ron": "ro", "rum": "ro",
         "hun": "hu", "fin": "fi", "est": "et", "lav": "lv", "lit": "lt", "swe": "sv",
         "dan": "da", "nor": "no", "nob": "no", "ell": "el", "gre": "el", "bul": "bg",
         "hin": "hi", "vie": "vi", "ind": "id", "heb": "he", "fas": "fa", "per": "fa"}
_EDGE_PUNCT = re.compile(r"^\W+|\W+$")
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


def decode_pieces(pieces: Sequence[str]) -> str:
    """A sentence's text from its subword pieces: sentencepiece (``▁`` starts a word) or
    subword-nmt (``@@`` ends a piece inside a word); other tokens are joined by spaces."""
    text = " ".join(pieces).replace("@@ ", "")
    if "\u2581" in text:
        text = text.replace(" ", "").replace("\u2581", " ")
    return text.strip()


def _word_keys(sentences: Sequence[List[str]]) -> Tuple[dict, set]:
    """Each word's key (without case and edge punctuation), and the words holding a digit;
    once per distinct word, since a corpus repeats its words. (Letters only: no digit; letters
    and digits only: no edge punctuation either.)"""
    vocabulary = set()
    for words in sentences:
        vocabulary.update(words)
    keys = {w: w.lower() if w.isalnum() else _EDGE_PUNCT.sub("", w).lower() for w in vocabulary}
    return keys, {w for w in vocabulary if not w.isalpha() and any(map(str.isdigit, w))}


def _unshared(sides: Sequence[List[str]], others: Sequence[List[str]], keys: dict,
              digits: set) -> List[str]:
    """:func:`unshared_words` of split sentences, with :func:`_word_keys` of all of them."""
    key = keys.__getitem__
    out = []
    for side, other in zip(sides, others):
        theirs = set(map(key, other))
        out.append(" ".join([w for w in side if key(w) not in theirs and w not in digits]))
    return out


def unshared_words(text: str, other: str) -> str:
    """The words of *text* that *other* lacks (compared without case and edge punctuation),
    without the words holding digits."""
    side, theirs = text.split(), other.split()
    return _unshared([side], [theirs], *_word_keys([side, theirs]))[0]


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


def raw_scores(texts: Sequence[str]) -> np.ndarray:
    """Per text, py3langid's raw naive Bayes score of every language (its ``_raw_score``:
    log1p of each byte n-gram feature's count times its log-probability, plus the prior),
    computed for many texts at once; a row of NaN for a text without features. The texts are
    walked through the identifier's automaton together, one byte position at a time (sorted
    by length, so that the texts still walking are a suffix), instead of byte by byte in
    Python: about 5x faster, equal up to float32 rounding of the sum's order."""
    ident, t = identifier(), _tables()
    # pylint: disable=protected-access  (the identifier's own normalisation of a text)
    encoded = [ident._encode(text) for text in texts]
    lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    order = np.argsort(lengths, kind="stable")
    out = np.full((len(texts), t.ptc.shape[1]), np.nan, dtype=np.float32)
    for rows in _chunks(order, lengths):
        length = lengths[rows]
        width = int(length[-1])
        if width == 0:
            continue
        text_bytes = np.zeros((len(rows), width), dtype=np.int32)
        text_bytes[np.arange(width)[None, :] < length[:, None]] = np.frombuffer(
            b"".join(encoded[i] for i in rows), dtype=np.uint8)
        features = np.full((len(rows), width), -1, dtype=np.int32)
        state = np.zeros(len(rows), dtype=np.int32)
        first = 0  # the texts before it have ended
        for j in range(width):
            while length[first] <= j:
                first += 1
            state[first:] = t.next_state[t.row_base[state[first:]] + text_bytes[first:, j]]
            features[first:, j] = t.feature[state[first:]]
        row, col = np.nonzero(features >= 0)
        counts = sparse.csr_matrix((np.ones(len(row), dtype=np.float32),
                                    (row, features[row, col])),
                                   shape=(len(rows), t.ptc.shape[0]))
        counts.sum_duplicates()
        has = np.diff(counts.indptr) > 0
        counts.data = np.log1p(counts.data)
        out[rows[has]] = (counts @ t.ptc + t.pc)[has]
    return out


def side_margins(texts: List[str], own: str) -> np.ndarray:
    """Per text, the best score of a language other than *own* less *own*'s score (raw naive
    Bayes log-likelihoods, nats); NaN for a text without features."""
    classes = list(identifier().nb_classes)
    mine = [i for i, c in enumerate(classes) if c == own]
    others = [i for i, c in enumerate(classes) if c != own and c not in _NOT_LANGUAGES]
    scores = raw_scores(texts)
    return (scores[:, others].max(axis=1) - scores[:, mine].max(axis=1)).astype(np.float32)


def langid_scores(src_texts: Sequence[str], tgt_texts: Sequence[str], src_lang: str,
                  tgt_lang: str) -> np.ndarray:
    """Per pair (``float32``), the larger of its two sides' margins (:func:`side_margins` over
    :func:`unshared_words`); a side whose language the identifier does not know is skipped
    (logged), and all NaN when neither is known."""
    if len(src_texts) != len(tgt_texts):
        raise ValueError(f"langid check: {len(src_texts)} source sentences against "
                         f"{len(tgt_texts)} target sentences")
    out = np.full(len(src_texts), np.nan, dtype=np.float32)
    owns = [identifier_code(lang or "") for lang in (src_lang, tgt_lang)]
    for lang, own in zip((src_lang, tgt_lang), owns):
        if own is None:
            logger.info(f"langid check: the identifier knows no language {lang!r}; that side "
                        "is not checked (known: ISO 639-1 codes such as en, de, es)")
    if owns == [None, None]:
        return out
    src_words, tgt_words = [t.split() for t in src_texts], [t.split() for t in tgt_texts]
    keys, digits = _word_keys(src_words + tgt_words)
    for texts, others, own in ((src_words, tgt_words, owns[0]), (tgt_words, src_words, owns[1])):
        if own is not None:
            out = np.fmax(out, side_margins(_unshared(texts, others, keys, digits), own))
    return out


def langid_flags(column: np.ndarray, bar: float):
    """The check's (score, flags, union margin) from its column of the pair checks."""
    score = np.nan_to_num(column, nan=-np.inf)
    return score, score > bar, np.where(np.isnan(column), -np.inf, column - bar)
