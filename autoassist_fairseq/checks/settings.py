"""Which pair checks run and where they flag: the bars, their reasons, and the options of
``autoassist-features`` and ``autoassist-check-report`` that set them.

:class:`PairCheckSettings` is recorded in the feature file's header, so the Boss flags pairs
with the settings the file was built with. The checks themselves are in :mod:`.columns`
and the modules it names; this module imports the standard library alone, since the Boss
reads the settings back (:mod:`.flags`).
"""

import argparse
import importlib.util
import math
import numbers
from dataclasses import asdict, dataclass, field, fields
from typing import Optional, Tuple

# P(side in the other language) above which a side is flagged; naive Bayes probabilities are
# extreme (a sentence of 10 subwords in the wrong language gets P > 0.999), so the bar leaves
# alone the short sides made of names and numbers that both languages share (P near 0.5).
FLAG_PROBABILITY = 0.99
# Below this share of sides confidently in their own language, the sides are not two
# languages to the check (e.g. one language on both sides), and its flags mean nothing.
MIN_OWN_LANGUAGE_SHARE = 0.5
# A pair is taken for unrelated when at least this share of random pairings of the corpus
# are as similar as its two sides. At a bar of 0.1 it flagged 85% of noisy Multi30k's
# misaligned pairs and 0.6% of its clean ones, but 3.4% of Tatoeba (short sentences carry
# little evidence; docs/benchmarks.md) and almost none of the crawled misalignment of
# ParaCrawl (docs/results/paracrawl/README.md). At 0.3 Tatoeba's flags fall below 1%, and a
# random pairing is still flagged with probability 0.7 (its p-value is uniform).
UNRELATED_P_VALUE = 0.3
# A side is also in the wrong language when its subwords that the other side does not share
# (names, numbers and codes are copied across; a third language is not) are, on average, no
# more likely in its own language than in the other: a mean log-likelihood ratio (nats per
# subword) at most this. 0 is the point where the evidence turns; crawled pairs with a side in
# a third language (Spanish, Polish, ...) sit near it, real sentences far above it.
LANGUAGE_EVIDENCE = 0.0
# Digits check: a pair with digits on both sides is flagged when at least DIGITS_MIN_DIFFERENT
# of its digits (0-9, counted with multiplicity over both sides) have no counterpart on the
# other side, and they are at least DIGITS_SHARE of all its digits. A translation keeps its
# numbers (their format may change: 1,914.00 and 1.914,00 hold the same digits); a misaligned
# line of a price list or a calendar does not. One different digit is let pass. A side
# without digits may spell a number out ("fifty" against "50", "halb drei" against "2:30"):
# such a pair is flagged only from DIGITS_ONE_SIDE digits on (a year, a price, a date).
DIGITS_MIN_DIFFERENT = 2
DIGITS_SHARE = 0.5
DIGITS_ONE_SIDE = 4
# Nats per subword (mean log-probability ratio against a random side) below which the worse
# side of a pair is taken to have no translation on the other. 0 is where the evidence turns
# (no better than a random pairing), and flags 1.3% of Tatoeba's short clean pairs; -0.5
# flags 0.29%, which takes the union of the checks over 1% of Tatoeba; -1 flags 0.05% of
# Tatoeba and none of Multi30k (docs/results/paracrawl/README.md).
LEXICAL_BAR = -1.0
# A script is foreign to a side when it holds under this share of the side's letters over the
# corpus: a share that a language's own alphabets exceed by far (Latin on the Japanese side
# of an English-Japanese corpus, names and brands, holds several percent) and that stray
# foreign lines stay far below at a crawled share of noise.
RARE_SCRIPT = 0.01
# A pair is flagged when at least this share of one side's letters (over the subwords the
# other side lacks) are in scripts rare on that side: most of what it says is in another
# alphabet.
SCRIPT_SHARE = 0.5
# Nats of log-likelihood by which another language must score above a side's own for the
# langid check to flag it: set on clean corpora (:mod:`.langid` gives the measurements).
LANGID_BAR = 7.0
# The checks that run unless --pair-checks names others, the same on every machine: a
# default that followed what is installed would give the same command other flags on two
# machines. The lexical check is opt-in: on the labelled ParaCrawl pairs it added under half
# a point of recall for 1.4x the features' time (docs/results/paracrawl/README.md), as its
# tables learn little from a small corpus. The script check (:mod:`.scripts`) costs one sparse
# product per side. The langid check (:mod:`.langid`) needs py3langid (setup.py installs
# it on Python >= 3.10; elsewhere :func:`check_available` stops a run that asks for it, with
# the fix): with it the union finds 87-89% of the labelled crawled pairs with a side in a
# wrong (mostly third) language, against 60-68%, for 8.0% of the valid ones, against 6.8%; it
# makes autoassist-features 1.4-1.6x slower on short sentences (Tatoeba), 2.2-2.6x on news.
DEFAULT_CHECKS = ("language", "unrelated", "digits", "script", "langid")
# Columns of the pair-checks array (pairs x 11): the feature file's layout, in this order.
COLUMNS = ("source_in_target_language", "target_in_source_language", "unrelated_p_value",
           "own_language_evidence", "digits_different", "source_digits", "target_digits",
           "source_translation_score", "target_translation_score", "foreign_script_share",
           "other_language_margin")


@dataclass(frozen=True)
class Check:
    """One pair check, declared once: its name (in ``--pair-checks`` and
    :attr:`PairCheckSettings.checks`), its columns of the pair-checks array (of
    :data:`COLUMNS`), the feature-file header's key of its count of flagged pairs, and what
    a pair it flags has (the build's log). Its bars are :class:`PairCheckSettings`' fields."""
    name: str
    columns: Tuple[str, ...]
    count_key: str
    flags: str

    @property
    def at(self) -> Tuple[int, ...]:
        """Its columns' indices in the pair-checks array."""
        return tuple(COLUMNS.index(c) for c in self.columns)


REGISTRY = (
    Check("language", ("source_in_target_language", "target_in_source_language",
                       "own_language_evidence"), "wrong_language",
          "with a side in the wrong language"),
    Check("unrelated", ("unrelated_p_value",), "unrelated", "with unrelated sides"),
    Check("digits", ("digits_different", "source_digits", "target_digits"), "digits",
          "with digits that differ"),
    Check("lexical", ("source_translation_score", "target_translation_score"), "lexical",
          "without word-for-word translations"),
    Check("script", ("foreign_script_share",), "script", "with a side in another alphabet"),
    Check("langid", ("other_language_margin",), "langid",
          "with a side in another language by py3langid"),
)
CHECK = {c.name: c for c in REGISTRY}
# The checks, by name (PairCheckSettings.checks).
CHECKS = tuple(CHECK)
# widths of the arrays older autoassist-features wrote: their first columns are COLUMNS'
OLDER_WIDTHS = (3, 7, 9, 10)


def _setting(default, low, low_in, high, high_in, why: str, help: str, option: str = ""):
    """A bar of :class:`PairCheckSettings`, declared once: its default, its range (``low``,
    ``high``: None for unbounded; whether each end is included; *why*: what a value outside
    it would do), its option's help (the default is added) and, where it differs from the
    field's name, its option."""
    return field(default=default, metadata={"range": (low, low_in, high, high_in, why),
                                            "help": help, "option": option})


@dataclass
class PairCheckSettings:
    """Which checks run and where they flag (recorded in the feature file's header). Each
    bar's range, option and help are in its field's metadata (:func:`_setting`): a bar
    outside its range would flag every pair, or none (to turn a check off, leave it out of
    ``--pair-checks``)."""
    checks: Tuple[str, ...] = DEFAULT_CHECKS
    flag_probability: float = _setting(
        FLAG_PROBABILITY, 0.5, True, 1.0, False,
        "a side is flagged when P(in the other side's language) is above it: below 0.5 it "
        "flags sides more likely in their own language, at 1 none",
        "flag a side whose P(written in the other side's language) is above this",
        option="--language-probability")
    language_evidence: float = _setting(
        LANGUAGE_EVIDENCE, None, True, None, True, "nats per subword",
        "flag a side whose subwords not shared with the other side are on average at most "
        "this much more likely (log-likelihood ratio, nats per subword) in its own language "
        "than in the other")
    unrelated_p_value: float = _setting(
        UNRELATED_P_VALUE, 0.0, False, 1.0, False,
        "a pair is flagged when more than this share of random pairings are as alike as its "
        "sides: at 0 nearly every pair is, at 1 none",
        "flag a pair when at least this share of random pairings of the corpus are as similar "
        "as its sides")
    digits_min_different: int = _setting(
        DIGITS_MIN_DIFFERENT, 1, True, None, True,
        "a count of digits: at 0 pairs whose digits all match could be flagged",
        "digits check: flag a pair with digits on both sides when at least this many of its "
        "digits have no counterpart on the other side ...")
    digits_share: float = _setting(
        DIGITS_SHARE, 0.0, True, 1.0, True,
        "a share of a pair's digits: above 1 no pair with digits on both sides is flagged",
        "... and they are at least this share of its digits")
    digits_one_side: int = _setting(
        DIGITS_ONE_SIDE, 1, True, None, True,
        "a count of digits: at 0 every pair without digits is flagged",
        "digits check: flag a pair with digits on one side only when it has at least this many")
    lexical_bar: float = _setting(
        LEXICAL_BAR, None, True, None, True, "nats per subword",
        "lexical check: flag a pair with a side whose subwords are on average less likely "
        "under its other side than under a random side of the corpus by more than this "
        "(log-probability ratio, nats per subword, of an IBM Model 1 table fitted on the "
        "corpus)")
    rare_script: float = _setting(
        RARE_SCRIPT, 0.0, False, 0.5, True,
        "a share of a side's letters under which a script is foreign to it: at 0 none is, "
        "and a script of more than half of a side's letters is its own",
        "script check: a script (Latin, Cyrillic, CJK, ...) is foreign to a side when it "
        "holds under this share of the side's letters over the corpus ...")
    script_share: float = _setting(
        SCRIPT_SHARE, 0.0, False, 1.0, True,
        "a share of a side's letters: at 0 every pair is flagged, above 1 none",
        "... and a pair is flagged when at least this share of one side's letters, over the "
        "subwords the other side lacks, are in scripts foreign to it")
    langid_bar: float = _setting(
        LANGID_BAR, 0.0, True, None, True,
        "nats by which another language must score above a side's own: below 0 a side "
        "scored best in its own language is flagged",
        "langid check (py3langid, 140 languages): flag a side whose words not found on the "
        "other side score some language other than its own (the source or target language "
        "code) above its own by more than this (nats of log-likelihood)")

    def __post_init__(self):
        self.checks = tuple(self.checks)
        unknown = [c for c in self.checks if c not in CHECKS]
        if unknown:
            raise ValueError(f"unknown pair check {', '.join(unknown)}; the checks are "
                             f"{', '.join(CHECKS)}")
        for name, (low, low_in, high, high_in, why) in RANGES.items():
            value = getattr(self, name)
            inside = (isinstance(value, numbers.Real) and math.isfinite(value)
                      and (low is None or (value >= low if low_in else value > low))
                      and (high is None or (value <= high if high_in else value < high)))
            if not inside:
                if low is not None and high is not None:
                    bounds = (f"a value in {'[' if low_in else '('}{low:g}, {high:g}"
                              f"{']' if high_in else ')'}")
                elif low is not None:
                    bounds = f"a value {'of at least' if low_in else 'above'} {low:g}"
                else:
                    bounds = "a finite value"
                raise ValueError(f"{option(name)} {value} is out of range: give {bounds} "
                                 f"(default: {getattr(type(self), name)}; {why})")

    def to_dict(self) -> dict:
        return dict(asdict(self), checks=list(self.checks))

    @classmethod
    def from_dict(cls, d: Optional[dict]) -> "PairCheckSettings":
        """Settings of a header (an older header without them: the defaults of its time)."""
        names = {f.name for f in fields(cls)}
        try:
            return cls(**{k: v for k, v in (d or {}).items() if k in names})
        except ValueError as err:  # e.g. a bar out of range: written before ranges were checked
            raise ValueError(f"the pair-check settings a feature file's header records: {err}; "
                             "rebuild the features (autoassist-features) with settings in "
                             "range") from None


# the bars, by field name, and their ranges (low, low included, high, high included, why)
_BARS = {f.name: f for f in fields(PairCheckSettings) if "range" in f.metadata}
RANGES = {name: f.metadata["range"] for name, f in _BARS.items()}


def check_available(settings: PairCheckSettings) -> None:
    """Raise ValueError, naming both fixes, where *settings* ask for the langid check and
    py3langid is not installed: before the features are counted, not after."""
    if "langid" in settings.checks and importlib.util.find_spec("py3langid") is None:
        others = ",".join(c for c in settings.checks if c != "langid") or "none"
        raise ValueError(f"the langid check (in --pair-checks {','.join(settings.checks)}, "
                         "the default's among them) needs py3langid, which is not installed: "
                         "pip install py3langid==0.4.0 (Python >= 3.10), or run without it: "
                         f"--pair-checks {others}")


def option(name: str) -> str:
    """The command-line option of a field of :class:`PairCheckSettings`."""
    return _BARS[name].metadata["option"] or "--" + name.replace("_", "-")


def add_settings_arguments(parser: argparse.ArgumentParser) -> None:
    """The settings of :class:`PairCheckSettings` as command-line options."""
    d = PairCheckSettings()
    group = parser.add_argument_group("pair checks")
    group.add_argument("--pair-checks", default=",".join(d.checks), metavar="NAMES",
                       help=f"comma-separated checks to run, of {', '.join(CHECKS)}; 'none' for "
                            f"none (default: {','.join(d.checks)})")
    for name, f in _BARS.items():
        flag = option(name)
        group.add_argument(flag, type=f.type, default=f.default, dest=name,
                           metavar=flag[2:].upper().replace("-", "_"),
                           help=f"{f.metadata['help']} (default: {f.default})")


def settings_from_args(args: argparse.Namespace) -> PairCheckSettings:
    names = [c for c in args.pair_checks.split(",") if c and c != "none"]
    return PairCheckSettings(checks=tuple(names),
                             **{name: getattr(args, name) for name in _BARS})
