"""OpusFilter's common heuristic filters, filter by filter, for ``autoassist-check-report``'s
side-by-side figures (``opusfilter`` block of its report; only where opusfilter is
installed: ``pip install autoassist-fairseq[opusfilter]``).

Each filter runs on the raw text of every pair of the mix (before the preparation's
cleaning, as OpusFilter runs on a raw corpus) with the parameters of :func:`heuristics`:
OpusFilter's defaults, but those it needs per language pair (the languages, the scripts). The
union flags a pair that any filter rejects; its continuous score, to rank pairs for the ROC
curve, is the number of filters that reject the pair.
"""

import logging
import warnings
from typing import Dict, List, Sequence, Tuple

import numpy as np

# the script of a language's letters, for CharacterScoreFilter (a language not named here:
# Latin)
_SCRIPTS = {"ru": "Cyrillic", "uk": "Cyrillic", "bg": "Cyrillic", "sr": "Cyrillic",
            "el": "Greek", "zh": "Han", "ja": "Han", "ko": "Hangul", "ar": "Arabic",
            "fa": "Arabic", "he": "Hebrew", "hi": "Devanagari", "th": "Thai"}


def heuristics(src: str, tgt: str) -> List[Tuple[str, dict]]:
    """(filter class name, its parameters) of the heuristic set for a language pair."""
    return [
        ("LengthFilter", {"unit": "word", "min_length": 1, "max_length": 100}),
        ("LengthRatioFilter", {"unit": "word", "threshold": 3}),
        ("LongWordFilter", {"threshold": 40}),
        ("HtmlTagFilter", {}),
        ("AverageWordLengthFilter", {"min_length": 2, "max_length": 20}),
        ("AlphabetRatioFilter", {"threshold": 0.75, "exclude_whitespace": False}),
        ("CharacterScoreFilter", {"scripts": [_SCRIPTS.get(src, "Latin"),
                                              _SCRIPTS.get(tgt, "Latin")],
                                  "thresholds": [1, 1]}),
        # id_method langid needs a py3langid newer than the langid check's pin (0.4.0 lacks
        # from_pickled_model); lingua's models ship in its wheel (offline)
        ("LanguageIDFilter", {"languages": [src, tgt], "id_method": "lingua",
                              "thresholds": [0, 0]}),
        ("TerminalPunctuationFilter", {"threshold": -2}),
        ("NonZeroNumeralsFilter", {"threshold": 0.5, "require_all": True}),
        ("LongestCommonSubstringFilter", {"threshold": 0.9, "require_all": True}),
        ("RepetitionFilter", {"threshold": 2, "min_length": 3, "max_length": 100}),
    ]


def heuristic_flags(sources: Sequence[str], targets: Sequence[str], src: str,
                    tgt: str) -> Dict[str, np.ndarray]:
    """Per filter of :func:`heuristics`, whether it rejects each pair (bool array)."""
    from opusfilter import filters

    pairs = list(zip(sources, targets))
    out = {}
    quiet = logging.getLogger("opusfilter.filters")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # LanguageIDFilter's deprecation warning
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # HtmlTagFilter's BeautifulSoup, once a sentence
            for name, params in heuristics(src, tgt):
                filt = getattr(filters, name)(**params)
                out[name] = np.fromiter((not filt.accept(s) for s in filt.score(pairs)),
                                        dtype=bool, count=len(pairs))
    finally:
        quiet.setLevel(level)
    return out
