"""The labelled pairs of ``autoassist-check-report`` and the clean corpus they are mixed into.

A labelled file is a TSV with a header: one column per language, ``label`` and optionally
``bicleaner`` (Bicleaner's score) and ``kind`` (a finer name of the noise, e.g. from
``research/add_noise.py --labelled-out``). The checks fit on the corpus they check, so the
labelled pairs are mixed into clean pairs of the same language pair (:func:`mix`) before they
are prepared and checked.

The label groups below are the report's: which labels count as noise and which as valid
translations.
"""

import csv
import gzip
import os
import zlib
from typing import Dict, List, Sequence

import numpy as np

NOISE = ("A", "L", "T")  # precision / recall: these against VALID
VALID = ("V", "F")
LABELS = VALID + NOISE + ("MT", "E")  # the labels a labelled file may hold (case counts)
AUC_NOISE = ("A", "L")  # the kinds the checks claim to catch
CLEAN = "clean"  # the label of the clean corpus's own pairs


def _lines(path: str) -> List[str]:
    """The lines of a UTF-8 text file (gzip where *path* ends in ``.gz``), each with its
    ``\n``; a file that is not gzip, or a line that is not UTF-8, raises ValueError naming
    the file, the line and the fix."""
    try:
        if path.endswith(".gz"):
            with gzip.open(path, "rb") as f:
                raw = f.read()
        else:
            with open(path, "rb") as f:
                raw = f.read()
    except (gzip.BadGzipFile, EOFError, zlib.error) as err:
        raise ValueError(f"{path} is not a complete gzip file ({err}): give the file "
                         "gzip-compressed whole, or a plain-text file without the .gz "
                         "suffix") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        column = err.start - (raw.rfind(b"\n", 0, err.start) + 1) + 1
        raise ValueError(f"{path} line {line}: not UTF-8 (byte 0x{raw[err.start]:02x} at byte "
                         f"{column} of the line); give the file in UTF-8, e.g. converted with "
                         "iconv -f LATIN1 -t UTF-8") from None
    lines = text.split("\n")  # "\n" alone ends a line, as csv and the preparation read it
    if not lines[-1]:
        lines.pop()
    return [line + "\n" for line in lines]


def read_labelled(path: str, src: str, tgt: str) -> Dict[str, list]:
    """Columns *src*, *tgt*, ``label`` and (optional) ``bicleaner`` and ``kind`` of a labelled
    TSV (``kind``: None where the file has no such column).

    Raises:
        FileNotFoundError: no file at *path*.
        ValueError: it is not gzip though named ``.gz``, a line is not UTF-8, a line has
            fewer fields than the header, a ``bicleaner`` field is not a number, a column
            or every pair is missing, or a label is unknown; the message names the file,
            the line and the column, and the fix.
    """
    if not os.path.isfile(path):
        what = "is a folder, not a file" if os.path.isdir(path) else "not found"
        raise FileNotFoundError(f"labelled pairs {what}: {path}; give the labelled TSV file "
                                f"(a header line naming the columns {src}, {tgt} and 'label', "
                                "then one pair a line)")
    reader = csv.DictReader(_lines(path), delimiter="\t", quoting=csv.QUOTE_NONE)
    missing = [c for c in (src, tgt, "label") if c not in (reader.fieldnames or [])]
    if missing:
        raise ValueError(f"{path} has no column {', '.join(missing)} (columns: "
                         f"{', '.join(reader.fieldnames or [])}); it needs one column per "
                         "language named as --src/--tgt, and 'label': give --src/--tgt the "
                         "names of its language columns, or name its header's columns so")
    rows, bicleaner = [], []
    for row in reader:  # QUOTE_NONE: one record a line, so line_num is the record's line
        short = [c for c in reader.fieldnames if row[c] is None]
        if short:
            raise ValueError(
                f"{path} line {reader.line_num}: {len(reader.fieldnames) - len(short)} fields "
                f"where the header has {len(reader.fieldnames)} (no column "
                f"{', '.join(repr(c) for c in short)}); give every line a tab-separated field "
                "for each column of the header, empty where a value is unknown")
        if "bicleaner" in row:
            value = row["bicleaner"].strip()
            try:
                bicleaner.append(float(value) if value else np.nan)
            except ValueError:
                raise ValueError(f"{path} line {reader.line_num}, column 'bicleaner': "
                                 f"{value!r} is not a number; give the Bicleaner score, or "
                                 "leave the field empty for a pair without one") from None
        rows.append(row)
    if not rows:
        raise ValueError(f"{path} holds no pairs")
    labels = [(r["label"] or "").strip() for r in rows]
    unknown = sorted(set(labels) - set(LABELS))
    if unknown:
        count = sum(label in unknown for label in labels)
        raise ValueError(f"{path} has {count} pairs with labels outside the known set: "
                         f"{', '.join(repr(u) for u in unknown)}; the labels are "
                         f"{', '.join(LABELS)} (upper case; V, F: valid translations, A, L, "
                         "T: noise)")
    kind = [(r["kind"] or "").strip() for r in rows] if "kind" in rows[0] else None
    return {"src": [r[src] for r in rows], "tgt": [r[tgt] for r in rows], "label": labels,
            "bicleaner": np.array(bicleaner) if "bicleaner" in rows[0] else None, "kind": kind}


def _text(prefix: str, lang: str) -> List[str]:
    for path in (f"{prefix}.{lang}", f"{prefix}.{lang}.gz"):
        if os.path.isfile(path):
            return [line[:-1] for line in _lines(path)]
    raise FileNotFoundError(f"clean corpus side not found: {prefix}.{lang} (nor .gz); give "
                            "--clean the path prefix of the clean corpus's two sides, PREFIX "
                            "for PREFIX.<src> and PREFIX.<tgt> (plain or .gz)")


def read_clean(prefixes: Sequence[str], src: str, tgt: str):
    """All pairs of the clean corpora, pooled."""
    sources, targets = [], []
    for prefix in prefixes:
        s, t = _text(prefix, src), _text(prefix, tgt)
        if len(s) != len(t):
            raise ValueError(f"clean corpus {prefix}: {len(s)} {src} lines against {len(t)} "
                             f"{tgt} lines; line N of one side must translate line N of the other")
        sources += s
        targets += t
    return sources, targets


def mix(labelled: dict, clean_src, clean_tgt, share: float, seed: int):
    """Labelled pairs plus as many clean pairs (sampled) as make them *share* of the mix,
    shuffled. Returns (sources, targets, labels, row of each pair in the labelled file or -1)."""
    n = len(labelled["label"])
    want = int(round(n * (1.0 - share) / share))
    if want > len(clean_src):
        raise ValueError(f"a share of {share} needs {want} clean pairs, the clean corpus has "
                         f"{len(clean_src)}: give a larger --share or more --clean corpora")
    rng = np.random.default_rng(seed)
    clean = rng.choice(len(clean_src), size=want, replace=False)
    src = list(labelled["src"]) + [clean_src[i] for i in clean]
    tgt = list(labelled["tgt"]) + [clean_tgt[i] for i in clean]
    labels = list(labelled["label"]) + [CLEAN] * want
    row = np.concatenate([np.arange(n), np.full(want, -1)])
    order = rng.permutation(len(src))
    return ([src[i] for i in order], [tgt[i] for i in order], [labels[i] for i in order],
            row[order])
