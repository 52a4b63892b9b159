"""What the pair checks flag, per label: from the ``--pairs-out`` file of
``autoassist-check-report``.

Per label: the pairs, those the cleaning dropped, and how many each combination of checks
flagged; of the pairs each check flags, how many share at least half of their words across
the two sides (names, codes, copied text), against all pairs that reached the checks; and,
for the langid check, how many unshared words the side it judged held (its margin is a naive
Bayes score of those words alone).

    python -m research.check_pairs /root/aa-work/paracrawl/pairs-seed0.tsv.gz --src en \\
        --tgt de --out docs/results/paracrawl/check-pairs-seed0.json
"""

import collections
import gzip
import json

import numpy as np

from autoassist_fairseq.checks import langid as langid_check
from autoassist_fairseq.checks.words import unshared_bags
from research.bench import doc_parser


def read_pairs(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        header, *rows = [line.rstrip("\n").split("\t") for line in f]
    return [dict(zip(header, r)) for r in rows], header


def shared_share(src: str, tgt: str) -> float:
    """Share of the source's words (lower case, edge punctuation off) found on the target."""
    words = [[w.lower().strip(".,:;!?()\"'|/-«»") for w in t.split()] for t in (src, tgt)]
    other = set(words[1])
    return sum(w in other for w in words[0]) / max(len(words[0]), 1)


def langid_bag_sizes(src, tgt, src_lang, tgt_lang):
    """Per pair, the unshared words of the side with the larger langid margin (the side the
    check judged)."""
    vocabulary, bags = unshared_bags(src, tgt)
    n = len(src)
    margins = langid_check.side_margins(
        vocabulary, bags, [langid_check.identifier_code(lang) for lang in (src_lang, tgt_lang)], n)
    margins = [np.full(n, np.nan) if m is None else m for m in margins]
    sizes = [np.bincount(sentence, minlength=n) for sentence, _ in bags]
    first = np.nan_to_num(margins[0], nan=-np.inf) >= np.nan_to_num(margins[1], nan=-np.inf)
    return np.where(first, sizes[0], sizes[1])


def breakdown(rows, header, src_lang, tgt_lang):
    checks = [h[:-5] for h in header if h.endswith("_flag") and h != "union_flag"]
    reached = [r for r in rows if r["dropped"] == "0"]
    half = [shared_share(r[src_lang], r[tgt_lang]) >= 0.5 for r in reached]
    out = {}
    if "langid" in checks:
        size = langid_bag_sizes([r[src_lang] for r in reached], [r[tgt_lang] for r in reached],
                                src_lang, tgt_lang)
    for label in sorted({r["label"] for r in rows}):
        mine = [r for r in rows if r["label"] == label]
        combos = collections.Counter(
            "+".join(c for c in checks if r[f"{c}_flag"] == "1") or "none"
            for r in mine if r["dropped"] == "0")
        here = [i for i, r in enumerate(reached) if r["label"] == label]
        shared = {f"flagged_{c}": sum(half[i] for i in here if reached[i][f"{c}_flag"] == "1")
                  for c in checks}
        entry = {"pairs": len(mine), "dropped": sum(r["dropped"] == "1" for r in mine),
                 "flagged_by": dict(sorted(combos.items())),
                 "half_words_shared": {"reached": sum(half[i] for i in here), **shared}}
        if "langid" in checks:
            flagged = [i for i in here if reached[i]["langid_flag"] == "1"]
            entry["langid_flagged_side_words"] = dict(sorted(collections.Counter(
                str(min(int(size[i]), 5)) if size[i] < 5 else "5+" for i in flagged).items()))
        out[label] = entry
    return out


def main(argv=None):
    p = doc_parser(__doc__)
    p.add_argument("pairs", help="the --pairs-out TSV of autoassist-check-report")
    p.add_argument("--src", required=True, help="its source column (language code)")
    p.add_argument("--tgt", required=True, help="its target column (language code)")
    p.add_argument("--out", help="also write the figures to this JSON file")
    a = p.parse_args(argv)
    rows, header = read_pairs(a.pairs)
    missing = [c for c in ("row", "label", "dropped", a.src, a.tgt) if c not in header]
    if missing:
        p.error(f"{a.pairs} lacks the columns {missing}: give a --pairs-out file of "
                "autoassist-check-report and its --src/--tgt")
    out = breakdown(rows, header, a.src, a.tgt)
    text = json.dumps(out, indent=1)
    print(text)
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
