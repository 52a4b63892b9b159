#!/usr/bin/env python
"""Count the translations that copy their source: the trace that copy noise in the
training data leaves in a model's output.

    python -m research.copied_outputs --source DATA/raw/test.en RUN/checkpoints/hyp.*.de ...

A hypothesis counts as a copy when it equals its source line, ignoring case and the
whitespace at its ends (a test set's translations share almost never a whole line with
their source). Each hypothesis file (one line per source line, as ``scripts/evaluate.sh``
writes ``hyp.CHECKPOINT.SUBSET.TGT``) gets a line: its copies and their share.
"""

import json
import sys
from pathlib import Path

from research.bench import doc_parser


def read_lines(path):
    return Path(path).read_text(encoding="utf-8").splitlines()


def copies(sources, hypotheses):
    """The indices of the hypotheses that equal their source (case and end blanks ignored)."""
    if len(sources) != len(hypotheses):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(sources)} source lines: "
                         "give the source side of the subset that was translated")
    return [i for i, (s, h) in enumerate(zip(sources, hypotheses))
            if s.strip().lower() == h.strip().lower()]


def main(argv=None):
    p = doc_parser(__doc__, 1)
    p.add_argument("--source", required=True, help="the source side of the translated subset")
    p.add_argument("hypotheses", nargs="+", help="detokenised hypothesis files, a line each")
    p.add_argument("--json", action="store_true", help="one JSON object instead of lines")
    a = p.parse_args(argv)
    sources = read_lines(a.source)
    out = {}
    for path in a.hypotheses:
        try:
            found = copies(sources, read_lines(path))
        except ValueError as err:
            sys.exit(f"copied_outputs.py: error: {path}: {err}")
        out[path] = {"copies": len(found), "lines": len(sources),
                     "share": round(len(found) / max(1, len(sources)), 4)}
        if not a.json:
            print(f"{path}: {len(found)} of {len(sources)} copy their source "
                  f"({out[path]['share']:.1%})")
    if a.json:
        print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
