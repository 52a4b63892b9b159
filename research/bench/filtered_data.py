"""The filtered corpora of the fixed-budget arms that train plain fairseq on a cleaned
corpus: each is the prepared DATA without some of its training pairs (autoassist-filter's
``write_corpus``: dictionaries, valid and test splits linked), written once into a folder
with a ``done`` file and reused after.

* :func:`checked_data`: without the pairs the plugin's pair checks flag;
* :func:`opusfilter_data`: without the pairs that any of OpusFilter's common heuristic
  filters rejects (:mod:`autoassist_fairseq.tools.opusfilter_heuristics`, the set of
  ``autoassist-check-report``'s ``opusfilter`` block), on the raw training text;
* :func:`dynamics_data`: without the pairs the pair checks or the training dynamics between
  two checkpoints flag (``autoassist-filter --dynamics FIRST LAST``).
"""

from pathlib import Path

import numpy as np

from . import BenchmarkError


def _done(out: Path, label: str) -> bool:
    if (out / "done").exists():
        print(f"[{label}] {out}: {(out / 'done').read_text().strip()}, dropped", flush=True)
        return True
    return False


def _record(out: Path, label: str, dropped: np.ndarray, detail: str = "") -> None:
    (out / "done").write_text(f"{int(dropped.sum())} of {len(dropped)} pairs flagged{detail}\n")
    _done(out, label)


def checked_data(data: Path, out: Path) -> Path:
    from autoassist_fairseq.tools.filter import filter_flagged

    if not _done(out, "plain-checked"):
        try:
            _, dropped = filter_flagged(data, out, features=False)
        except (FileNotFoundError, ValueError) as err:
            raise BenchmarkError(f"plain-checked: {err}")
        _record(out, "plain-checked", dropped)
    return out


def raw_training_text(data: Path):
    """The raw source and target line of each binarised training pair of *data*: DATA/raw/
    train.SRC and train.TGT, in the order of DATA/train.kept-lines."""
    from autoassist_fairseq.features.prepared import kept_lines, language_pair, \
        open_training_sides

    src, tgt = language_pair(data)
    sides = open_training_sides(data, src, tgt)
    num_pairs = len(sides[src])
    del sides
    lines = kept_lines(data, num_pairs)
    raw = {}
    for lang in (src, tgt):
        path = data / "raw" / f"train.{lang}"
        if not path.exists():
            raise BenchmarkError(f"{path} not found: the OpusFilter arm reads the raw training "
                                 "text that scripts/prepare-corpus.sh keeps in DATA/raw")
        text = path.read_text(encoding="utf-8").split("\n")
        raw[lang] = [text[i] for i in (range(num_pairs) if lines is None else lines)]
    return src, tgt, raw[src], raw[tgt]


def opusfilter_data(data: Path, out: Path) -> Path:
    from autoassist_fairseq.tools.filter import write_corpus
    from autoassist_fairseq.tools.opusfilter_heuristics import heuristic_flags

    if not _done(out, "plain-opusfilter"):
        src, tgt, sources, targets = raw_training_text(data)
        try:
            flags = heuristic_flags(sources, targets, src, tgt)
        except ImportError as err:
            raise BenchmarkError(f"plain-opusfilter needs opusfilter ({err}): "
                                 "pip install opusfilter")
        dropped = np.logical_or.reduce(list(flags.values()))
        if dropped.all():
            raise BenchmarkError(f"OpusFilter's heuristics reject every pair of {data}")
        write_corpus(data, out, np.flatnonzero(~dropped), features=False)
        per_filter = ", ".join(f"{name} {int(f.sum())}" for name, f in flags.items())
        _record(out, "plain-opusfilter", dropped, f" ({per_filter})")
    return out


def dynamics_data(data: Path, out: Path, first: Path, last: Path) -> Path:
    from autoassist_fairseq.tools.filter import filter_flagged

    if not _done(out, "two-stage"):
        try:
            _, dropped = filter_flagged(data, out, features=False,
                                        dynamics=[str(first), str(last)])
        except (FileNotFoundError, ValueError) as err:
            raise BenchmarkError(f"two-stage: {err}")
        _record(out, "two-stage", dropped, f" (checks or dynamics {first.name} -> {last.name})")
    return out
