#!/usr/bin/env python3
"""Corrupt a share of a clean parallel training set with the noise of web-crawled corpora.

The noise kinds are those Khayrallah & Koehn (2018, "On the Impact of Various Types of
Noise on Neural Machine Translation") found in crawled parallel data:

* ``misaligned``: the target is the target of another pair;
* ``copy``: the source copied untranslated as the target;
* ``wrong_lang``: the target is in the wrong language (the source sentence of another
  pair);
* ``truncated``: one side (the longer) cut to a fraction (``--truncate-range``) of its
  words, as short segments of broken sentence splitting.

A chosen share of the pairs (``--share``, default 0.25) is drawn with ``--seed`` and split
between the kinds by ``--mix``. Replacements always come from the clean input, so a
corrupted pair never feeds another. Writes OUT.SRC, OUT.TGT (plain UTF-8) and OUT.labels
(one line per pair: ``clean`` or its noise kind) and prints the counts. Only the
training set is written: valid and test stay clean. Example::

    python -m research.add_noise --src en --tgt de \\
        --train /work/shared/data/tatoeba-de-en/train --out work/noisy/train --share 0.25
    bash scripts/prepare-corpus.sh --src en --tgt de --train work/noisy/train \\
        --valid /work/shared/data/tatoeba-de-en/valid \\
        --test /work/shared/data/tatoeba-de-en/test --out work/tatoeba-noisy
    cp work/noisy/train.labels work/tatoeba-noisy/train.noise-labels

prepare-corpus.sh drops some pairs (a truncated side often fails its length-ratio
rule); its ``train.kept-lines`` maps the binarised pairs back to these labels.
"""

import argparse
import gzip
import json
import os

import numpy as np

KINDS = ("misaligned", "copy", "wrong_lang", "truncated")
CLEAN = "clean"
DEFAULT_MIX = ",".join(f"{k}={1 / len(KINDS)}" for k in KINDS)
SHARE_RANGE = (0.05, 0.5)


def read_lines(prefix, lang):
    """Lines of PREFIX.LANG (or PREFIX.LANG.gz) without their newline."""
    for path in (f"{prefix}.{lang}", f"{prefix}.{lang}.gz"):
        if os.path.exists(path):
            opener = gzip.open if path.endswith(".gz") else open
            try:
                with opener(path, "rt", encoding="utf-8", newline="\n") as f:
                    return [line.rstrip("\n") for line in f], path
            except UnicodeDecodeError as err:
                raise SystemExit(f"add_noise.py: error: {path} is not valid UTF-8 ({err}); "
                                 "convert it, e.g. iconv -f latin1 -t utf-8") from None
    raise SystemExit(f"add_noise.py: error: neither {prefix}.{lang} nor {prefix}.{lang}.gz "
                     "exists; --train takes the prefix of the two sides (e.g. raw/train)")


def parse_mix(text):
    """'misaligned=0.5,copy=0.5' -> {kind: weight} over KINDS (missing kinds 0); the
    weights must be >= 0 and sum to 1."""
    mix = dict.fromkeys(KINDS, 0.0)
    for item in filter(None, (s.strip() for s in text.split(","))):
        kind, _, value = item.partition("=")
        kind = kind.strip()
        if kind not in KINDS:
            raise ValueError(f"--mix: unknown noise kind {kind!r}; use {', '.join(KINDS)}")
        try:
            mix[kind] = float(value)
        except ValueError:
            raise ValueError(f"--mix: {item!r} is not KIND=NUMBER") from None
        if not mix[kind] >= 0:
            raise ValueError(f"--mix: {item!r}: a share must be >= 0")
    if abs(sum(mix.values()) - 1) > 1e-6:
        raise ValueError(f"--mix {text!r}: the shares sum to {sum(mix.values()):g}, not 1")
    return mix


def split_counts(total, mix):
    """Integer counts per kind summing to *total* (largest remainders get the rest)."""
    exact = {k: total * w for k, w in mix.items()}
    counts = {k: int(v) for k, v in exact.items()}
    rest = total - sum(counts.values())
    for k in sorted(exact, key=lambda k: exact[k] - counts[k], reverse=True)[:rest]:
        counts[k] += 1
    return counts


def other_index(rng, n, i, differs):
    """A random j != i with differs(j) true (one of every such j if random tries fail)."""
    for _ in range(20):
        j = int(rng.integers(n))
        if j != i and differs(j):
            return j
    candidates = [j for j in range(n) if j != i and differs(j)]
    if not candidates:
        raise ValueError(f"pair {i}: no other pair has a different sentence to swap in")
    return candidates[int(rng.integers(len(candidates)))]


def add_noise(src, tgt, share=0.25, mix=None, seed=1, truncate_range=(0.2, 0.6)):
    """Corrupt round(share * len(src)) pairs.

    Args:
        src (list of str): source sentences.
        tgt (list of str): target sentences, aligned with *src*.
        share (float, optional): share of pairs to corrupt (default: 0.25).
        mix (dict, optional): weight of each kind of KINDS (default: equal weights).
        seed (int, optional): seed of the choice of pairs and corruptions (default: 1).
        truncate_range (tuple, optional): a truncated side keeps a uniform fraction in this
            range of its words, at least one and at least one fewer (default: (0.2, 0.6)).

    Returns:
        (list, list, list): noisy source and target sentences, and the label of each pair.
    """
    if len(src) != len(tgt):
        raise ValueError(f"the sides differ in length: {len(src)} source and {len(tgt)} "
                         "target lines")
    if not SHARE_RANGE[0] <= share <= SHARE_RANGE[1]:
        raise ValueError(f"--share {share} is out of range: use {SHARE_RANGE[0]}-"
                         f"{SHARE_RANGE[1]}")
    mix = mix or parse_mix(DEFAULT_MIX)
    rng = np.random.default_rng(seed)
    n = len(src)
    counts = split_counts(int(round(share * n)), mix)
    words = [(s.split(), t.split()) for s, t in zip(src, tgt)]
    # truncation must change the pair: only pairs with a side of >= 2 words qualify
    can_cut = np.array([max(len(s), len(t)) >= 2 for s, t in words])
    order = rng.permutation(n)
    cut = order[can_cut[order]][:counts["truncated"]]
    if len(cut) < counts["truncated"]:
        raise ValueError(f"only {len(cut)} pairs have a side of 2+ words to truncate; "
                         f"{counts['truncated']} asked: lower the truncated share of --mix")
    rest = order[~np.isin(order, cut)]
    chosen, start = {"truncated": cut}, 0
    for kind in ("misaligned", "copy", "wrong_lang"):
        chosen[kind] = rest[start:start + counts[kind]]
        start += counts[kind]
    out_src, out_tgt, labels = list(src), list(tgt), [CLEAN] * n
    for kind in KINDS:
        for i in map(int, np.sort(chosen[kind])):
            if kind == "misaligned":
                out_tgt[i] = tgt[other_index(rng, n, i, lambda j: tgt[j] != tgt[i])]
            elif kind == "copy":
                out_tgt[i] = src[i]
            elif kind == "wrong_lang":
                out_tgt[i] = src[other_index(rng, n, i, lambda j: src[j] != src[i])]
            else:
                side = 0 if len(words[i][0]) >= len(words[i][1]) else 1
                w = words[i][side]
                keep = min(len(w) - 1, max(1, int(rng.uniform(*truncate_range) * len(w))))
                (out_src if side == 0 else out_tgt)[i] = " ".join(w[:keep])
            labels[i] = kind
    return out_src, out_tgt, labels


def parse_cli(argv):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example:\n  python -m research.add_noise --src en --tgt de --train raw/train "
               "--out noisy/train --share 0.25 --mix misaligned=0.4,copy=0.2,wrong_lang=0.2,"
               "truncated=0.2 --seed 1")
    p.add_argument("--src", required=True, help="source language suffix (e.g. en)")
    p.add_argument("--tgt", required=True, help="target language suffix (e.g. de)")
    p.add_argument("--train", required=True,
                   help="prefix of the clean training set: PREFIX.SRC and PREFIX.TGT (.gz too)")
    p.add_argument("--out", required=True,
                   help="output prefix: writes OUT.SRC, OUT.TGT and OUT.labels")
    p.add_argument("--share", type=float, default=0.25,
                   help=f"share of pairs to corrupt, {SHARE_RANGE[0]}-{SHARE_RANGE[1]} "
                        "(default: 0.25)")
    p.add_argument("--mix", default=DEFAULT_MIX,
                   help="KIND=SHARE,... over " + ", ".join(KINDS) + "; missing kinds get 0, "
                        "the shares must sum to 1 (default: equal shares)")
    p.add_argument("--seed", type=int, default=1, help="random seed (default: 1)")
    p.add_argument("--truncate-range", type=float, nargs=2, default=(0.2, 0.6),
                   metavar=("LOW", "HIGH"),
                   help="fraction of its words a truncated side keeps (default: 0.2 0.6)")
    return p.parse_args(argv)


def main(argv=None):
    a = parse_cli(argv)
    lo, hi = a.truncate_range
    if not 0 < lo <= hi < 1:
        raise SystemExit(f"add_noise.py: error: --truncate-range {lo} {hi}: need "
                         "0 < LOW <= HIGH < 1")
    if a.src == a.tgt:
        raise SystemExit("add_noise.py: error: --src and --tgt must differ")
    src, src_path = read_lines(a.train, a.src)
    tgt, tgt_path = read_lines(a.train, a.tgt)
    try:
        out = add_noise(src, tgt, a.share, parse_mix(a.mix), a.seed, (lo, hi))
    except ValueError as err:
        raise SystemExit(f"add_noise.py: error: {err} ({src_path}, {tgt_path})")
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    for lines, suffix in zip(out, (a.src, a.tgt, "labels")):
        with open(f"{a.out}.{suffix}", "w", encoding="utf-8", newline="\n") as f:
            f.writelines(line + "\n" for line in lines)
    counts = {k: out[2].count(k) for k in (CLEAN,) + KINDS}
    print(json.dumps({"pairs": len(src), "noisy": len(src) - counts[CLEAN],
                      "noisy_share": (len(src) - counts[CLEAN]) / max(1, len(src)),
                      "counts": counts, "seed": a.seed,
                      "written": [f"{a.out}.{s}" for s in (a.src, a.tgt, "labels")]}, indent=1))


if __name__ == "__main__":
    main()
