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

The bar is set on clean corpora, not on labelled noise: at 6 nats it flags at most 0.2% of
the pairs of Tatoeba de-en, Multi30k and newstest (docs/results/paracrawl/README.md). The
score of a pair is the larger margin of its two sides (NaN: no side could be judged).
"""

import logging
import re
from typing import List, Optional, Sequence

import numpy as np

logger = logging.getLogger("autoassist_fairseq.features")

LANGID_BAR = 6.0
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
_FEATURELESS = float(np.finfo(np.float32).min)  # py3langid's score of a text without features


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


def _key(word: str) -> str:
    return _EDGE_PUNCT.sub("", word).lower()


def unshared_words(text: str, other: str) -> str:
    """The words of *text* that *other* lacks (compared without case and edge punctuation),
    without the words holding digits."""
    theirs = {_key(w) for w in other.split()}
    return " ".join(w for w in text.split()
                    if _key(w) not in theirs and not any(ch.isdigit() for ch in w))


def side_margins(texts: List[str], own: str) -> np.ndarray:
    """Per text, the best score of a language other than *own* less *own*'s score (raw naive
    Bayes log-likelihoods, nats); NaN for a text without features."""
    ident = identifier()
    classes = list(ident.nb_classes)
    mine = [i for i, c in enumerate(classes) if c == own]
    others = [i for i, c in enumerate(classes) if c != own and c not in _NOT_LANGUAGES]
    out = np.full(len(texts), np.nan, dtype=np.float32)
    for i, text in enumerate(texts):
        if text:
            # pylint: disable=protected-access  (the identifier's own normalisation and
            # scores, without its softmax over all classes)
            scores = ident._raw_score(ident._encode(text))
            if scores.max() > _FEATURELESS:
                out[i] = scores[others].max() - scores[mine].max()
    return out


def langid_scores(src_texts: Sequence[str], tgt_texts: Sequence[str], src_lang: str,
                  tgt_lang: str) -> np.ndarray:
    """Per pair (``float32``), the larger of its two sides' margins (:func:`side_margins` over
    :func:`unshared_words`); a side whose language the identifier does not know is skipped
    (logged), and all NaN when neither is known."""
    if len(src_texts) != len(tgt_texts):
        raise ValueError(f"langid check: {len(src_texts)} source sentences against "
                         f"{len(tgt_texts)} target sentences")
    out = np.full(len(src_texts), np.nan, dtype=np.float32)
    for texts, others, lang in ((src_texts, tgt_texts, src_lang), (tgt_texts, src_texts,
                                                                   tgt_lang)):
        own = identifier_code(lang or "")
        if own is None:
            logger.info(f"langid check: the identifier knows no language {lang!r}; that side "
                        "is not checked (known: ISO 639-1 codes such as en, de, es)")
            continue
        margins = side_margins([unshared_words(a, b) for a, b in zip(texts, others)], own)
        out = np.fmax(out, margins)
    return out


def langid_flags(column: np.ndarray, bar: float):
    """The check's (score, flags, union margin) from its column of the pair checks."""
    score = np.nan_to_num(column, nan=-np.inf)
    return score, score > bar, np.where(np.isnan(column), -np.inf, column - bar)
