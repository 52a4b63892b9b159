#!/usr/bin/env python3
"""The langid check's score on clean corpora: the share of pairs over each candidate bar.

The bar of ``--langid-bar`` is set from clean corpora, never from labelled noise: each clean
corpus's raw text (``PREFIX.SRC``/``PREFIX.TGT``, plain or ``.gz``) is scored by
``checks.langid.langid_scores`` (the words of a side that the other side lacks,
its own language against the best other one), and the share of pairs over each bar, the
upper percentiles and the identifier's speed (pairs per CPU second) are written. With
``--features NAME=PREFIX`` (a corpus as prepared, its ``autoassist-features`` files), the
share of its pairs that the union of all its checks flags at each bar, from the stored
scores.

    python -m research.langid_bar --corpus tatoeba=../shared/data/tatoeba-de-en/train \\
        --corpus multi30k=../shared/data/multi30k-en-de/train --src en --tgt de \\
        --out docs/results/paracrawl/langid-bar-clean.json
"""

import dataclasses
import json
import time

import numpy as np

from autoassist_fairseq.tools.labelled_pairs import read_clean
from autoassist_fairseq.checks.langid import langid_scores
from autoassist_fairseq.checks.columns import flagged
from autoassist_fairseq.features.store import FeatureStore
from research.bench import doc_parser

BARS = (3.0, 4.0, 5.0, 6.0, 7.0, 8.0)
PERCENTILES = (99.0, 99.5, 99.8, 99.9)


def bar_table(src, tgt, src_lang, tgt_lang, bars=BARS) -> dict:
    """Flag shares, percentiles and speed of the check on one clean corpus's pairs."""
    start = time.process_time()
    margins = langid_scores(src, tgt, src_lang, tgt_lang)
    cpu = time.process_time() - start
    scores = np.nan_to_num(margins, nan=-np.inf)
    return {"pairs": len(src), "cpu_s": round(cpu, 2),
            "pairs_per_cpu_s": round(len(src) / max(cpu, 1e-9), 1),
            "percentiles": {str(q): float(np.percentile(scores, q)) for q in PERCENTILES},
            "flagged": {str(b): float((scores > b).mean()) for b in bars}}


def union_table(prefix: str, bars=BARS) -> dict:
    """The union of the checks that a prepared corpus's features ran (``autoassist-features``,
    the langid check among them), at each candidate bar of the langid check: the share of
    the pairs it flags."""
    store = FeatureStore.open(prefix)
    checks, settings = store.pair_check_columns(), store.pair_check_settings()
    if checks is None or "langid" not in settings.checks:
        raise SystemExit(f"{prefix}: features without the langid check; build them with "
                         "autoassist-features at its default --pair-checks")
    flags = {str(b): flagged(checks, dataclasses.replace(settings, langid_bar=b)) for b in bars}
    return {"pairs": len(checks), "checks": list(settings.checks),
            "union_flagged": {b: float(f.mean()) for b, f in flags.items()},
            "union_flagged_pairs": {b: int(f.sum()) for b, f in flags.items()}}


def main(argv=None):
    p = doc_parser(__doc__)
    p.add_argument("--corpus", action="append", default=[], metavar="NAME=PREFIX",
                   help="a clean corpus: its name and the prefix of its two sides (repeatable)")
    p.add_argument("--features", action="append", default=[], metavar="NAME=PREFIX",
                   help="a clean corpus as prepared: its name and the prefix of its "
                        "autoassist-features files; gives the union of all its checks at each "
                        "bar (repeatable)")
    p.add_argument("--src", required=True, help="source language code (e.g. en)")
    p.add_argument("--tgt", required=True, help="target language code (e.g. de)")
    p.add_argument("--bar", type=float, action="append",
                   help="a candidate bar in nats (repeatable; default: "
                        f"{', '.join(map(str, BARS))})")
    p.add_argument("--out", required=True, help="the JSON to write")
    a = p.parse_args(argv)
    if not a.corpus and not a.features:
        p.error("give at least one --corpus or --features")
    out = {}
    bars = tuple(a.bar or BARS)
    for option, specs in (("--corpus", a.corpus), ("--features", a.features)):
        for spec in specs:
            name, sep, prefix = spec.partition("=")
            if not sep or not name or not prefix:
                p.error(f"{option} {spec!r}: expected NAME=PREFIX")
            if option == "--corpus":
                src, tgt = read_clean([prefix], a.src, a.tgt)
                out[name] = dict(bar_table(src, tgt, a.src, a.tgt, bars), prefix=prefix)
            else:
                out[name] = dict(union_table(prefix, bars), prefix=prefix)
            print(name, json.dumps(out[name]), flush=True)
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
