#!/usr/bin/env python3
"""Corrupt a share of a clean parallel training set with the noise of web-crawled corpora.

The first kinds are those Khayrallah & Koehn (2018, "On the Impact of Various Types of
Noise on Neural Machine Translation") found in crawled parallel data:

* ``misaligned``: the target is the target of another pair, drawn at random;
* ``copy``: the source copied untranslated as the target;
* ``wrong_lang``: the target is in the wrong language (the source sentence of another
  pair);
* ``truncated``: one side (the longer) cut to a fraction (``--truncate-range``) of its
  words, as short segments of broken sentence splitting.

A random other target is easy to find: it rarely shares a word with the source. Crawled
noise is harder: the misaligned pairs of ParaCrawl (Bañón et al., 2020, "ParaCrawl:
Web-Scale Acquisition of Parallel Corpora", whose human evaluation labels them ``A``) are
mostly neighbouring lines of the same page aligned one off, which share names, numbers and
the topic and are no translation. Three kinds model such noise:

* ``related_misaligned``: the target of the source's nearest neighbour: the pair whose
  source is closest in TF-IDF cosine (lower-cased words, sublinear term frequencies) over
  the source sides of the whole clean corpus; not the pair itself, not a pair whose target
  is the same up to case, spaces and punctuation, and not one whose source is as good as the
  same (cosine >= ``--related-max-similarity``: "I'm tired." and "I am tired." have targets
  that translate each other). A pair whose source shares no word with another pair's is
  not drawn for this kind;
* ``partial``: a partial translation: the source whole, the target without one of its
  clauses (split at a comma or semicolon followed by a space; the clause drawn at random,
  the sentence's final punctuation kept) where it has two or more, otherwise cut to a
  leading fraction (``--partial-range``) of its words;
* ``boilerplate``: one short target repeated for many sources, as a crawled site's menu
  line or notice aligned to whatever text: ``--boilerplate-lines`` distinct clean target
  lines of at most ``--boilerplate-max-words`` words, drawn with the seed, given in turn to
  the drawn pairs (the next line where a pair's own target is the one due).

A chosen share of the pairs (``--share``, default 0.25) is drawn with ``--seed`` and split
between the kinds by ``--mix`` (default: the first four kinds in equal shares, which gives
exactly the output of the code before the other kinds existed; ``--mix realistic``: mostly
the kinds of crawled noise, :data:`MIXES`). Replacements always come from the clean input,
so a corrupted pair never feeds another. Writes OUT.SRC, OUT.TGT (plain UTF-8) and
OUT.labels (one line per pair: ``clean`` or its noise kind) and prints the counts. Only the
training set is written: valid and test stay clean. Example::

    python -m research.add_noise --src en --tgt de \\
        --train /work/shared/data/tatoeba-de-en/train --out work/noisy/train --share 0.25
    bash scripts/prepare-corpus.sh --src en --tgt de --train work/noisy/train \\
        --valid /work/shared/data/tatoeba-de-en/valid \\
        --test /work/shared/data/tatoeba-de-en/test --out work/tatoeba-noisy
    cp work/noisy/train.labels work/tatoeba-noisy/train.noise-labels

prepare-corpus.sh drops some pairs (a truncated side often fails its length-ratio
rule); its ``train.kept-lines`` maps the binarised pairs back to these labels.

``--labelled-out TSV`` also writes every noisy pair and as many clean pairs (drawn with the
seed), in corpus order, in the input format of ``autoassist-check-report``: columns SRC and
TGT (named by --src/--tgt), ``label`` (the human labels of the ParaCrawl evaluation:
:data:`LABEL_OF_KIND`), ``kind`` (the noise kind or ``clean``) and ``line`` (the pair's line
in the training set), so that the pair checks are scored per kind.
"""

import argparse
import gzip
import json
import os
import re

import numpy as np

CRAWL_KINDS = ("misaligned", "copy", "wrong_lang", "truncated")  # Khayrallah & Koehn 2018
RELATED_KINDS = ("related_misaligned", "partial", "boilerplate")
KINDS = CRAWL_KINDS + RELATED_KINDS
CLEAN = "clean"
DEFAULT_MIX = ",".join(f"{k}={1 / len(CRAWL_KINDS)}" for k in CRAWL_KINDS)
MIXES = {"realistic": "related_misaligned=0.4,partial=0.2,boilerplate=0.1,copy=0.1,"
                      "wrong_lang=0.1,misaligned=0.1"}
SHARE_RANGE = (0.05, 0.5)
RELATED_MAX_SIMILARITY = 0.8
# the labels of the ParaCrawl human evaluation (autoassist-check-report's LABELS): A
# misaligned, L wrong language (an untranslated copy is a target in the source's language),
# E translation error (part of the meaning missing on one side), V valid
LABEL_OF_KIND = {CLEAN: "V", "misaligned": "A", "related_misaligned": "A", "boilerplate": "A",
                 "copy": "L", "wrong_lang": "L", "partial": "E", "truncated": "E"}
_CLAUSE = re.compile(r"([,;])\s+")  # a clause ends at a comma or semicolon and a space
_FINAL = re.compile(r"[.!?…]+$")
_NOT_WORD = re.compile(r"[\W_]+")


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
    """'misaligned=0.5,copy=0.5' (or a name of MIXES) -> {kind: weight} over KINDS (missing
    kinds 0); the weights must be >= 0 and sum to 1."""
    text = MIXES.get(text.strip(), text)
    mix = dict.fromkeys(KINDS, 0.0)
    for item in filter(None, (s.strip() for s in text.split(","))):
        kind, _, value = item.partition("=")
        kind = kind.strip()
        if kind not in KINDS:
            raise ValueError(f"--mix: unknown noise kind {kind!r}; use {', '.join(KINDS)} "
                             f"(or a named mix: {', '.join(MIXES)})")
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
    """Integer counts per kind summing to *total* (largest remainders get the rest; a kind
    of weight 0 gets none)."""
    exact = {k: total * w for k, w in mix.items()}
    counts = {k: int(v) for k, v in exact.items()}
    rest = total - sum(counts.values())
    for k in sorted((k for k in exact if mix[k] > 0), key=lambda k: exact[k] - counts[k],
                    reverse=True)[:rest]:
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


def normalise(text):
    """*text* lower-cased without spaces and punctuation: targets that differ only there are
    the same translation."""
    return _NOT_WORD.sub("", text.lower())


def nearest_neighbours(src, tgt, candidates, count, max_similarity=RELATED_MAX_SIMILARITY,
                       chunk=128):
    """For the first *count* of *candidates* (indices, in order) that have one, the pair
    whose source is nearest in TF-IDF cosine over *src* (the whole corpus): not itself, not a
    pair with the same normalised target, not one of cosine >= *max_similarity*, and of
    cosine > 0. Only the candidates' rows of the similarity are computed, *chunk* at a time.

    Returns:
        (np.ndarray, np.ndarray, np.ndarray): the candidates drawn, their neighbours and
        the cosine of each.
    """
    from sklearn.feature_extraction.text import TfidfVectorizer
    x = TfidfVectorizer(token_pattern=r"(?u)\b\w+\b", sublinear_tf=True,
                        dtype=np.float32).fit_transform(src)  # rows of norm 1 (or 0)
    x_t = x.T.tocsr()
    ids = {}
    target_id = np.array([ids.setdefault(normalise(t), len(ids)) for t in tgt],
                         dtype=np.int64)  # the same id: the same normalised target
    drawn, partner, cosine = [], [], []
    candidates = np.asarray(candidates, dtype=np.int64)
    for start in range(0, len(candidates), chunk):
        if len(drawn) >= count:
            break
        rows = candidates[start:start + chunk]
        sim = (x[rows] @ x_t).toarray()
        sim[sim >= max_similarity - 1e-6] = 0.0
        sim[target_id[None, :] == target_id[rows][:, None]] = 0.0  # the pair itself too
        best = sim.argmax(axis=1)
        value = sim[np.arange(len(rows)), best]
        for i, j, v in zip(rows, best, value):
            if v > 0 and len(drawn) < count:
                drawn.append(int(i))
                partner.append(int(j))
                cosine.append(float(v))
    if len(drawn) < count:
        raise ValueError(f"only {len(drawn)} of the {len(candidates)} pairs left for "
                         f"related_misaligned have a neighbour whose source shares a word "
                         f"(cosine below --related-max-similarity {max_similarity}) and whose "
                         f"target differs; {count} asked: lower the related_misaligned share "
                         "of --mix or --share, or raise --related-max-similarity")
    return (np.array(drawn, dtype=np.int64), np.array(partner, dtype=np.int64),
            np.array(cosine))


def clauses(text):
    """*text* split at its clause ends: (clauses, separators), or None where it has a single
    clause or an empty one."""
    parts = _CLAUSE.split(text)
    found, seps = [p.strip() for p in parts[0::2]], parts[1::2]
    if len(found) < 2 or not all(_NOT_WORD.sub("", c) for c in found):
        return None
    return found, seps


def drop_clause(text, k):
    """*text* without its clause *k* (of :func:`clauses`); the final punctuation kept."""
    found, seps = clauses(text)
    keep = [(c, s) for i, (c, s) in enumerate(zip(found, seps + [""])) if i != k]
    out = " ".join(c + s for c, s in keep[:-1]) + (" " if len(keep) > 1 else "") + keep[-1][0]
    final = _FINAL.search(found[-1])
    if k == len(found) - 1 and final and not _FINAL.search(out):
        out += final.group()
    return out


def partial(rng, text, partial_range):
    """A partial translation of *text* (2+ words): one clause dropped where it has two or
    more, else a leading fraction in *partial_range* of its words (at least one, at least
    one fewer)."""
    split = clauses(text)
    if split:
        return drop_clause(text, int(rng.integers(len(split[0]))))
    w = text.split()
    keep = min(len(w) - 1, max(1, int(rng.uniform(*partial_range) * len(w))))
    return " ".join(w[:keep])


def boilerplate_lines(rng, tgt, lines, max_words):
    """*lines* distinct clean target lines of 1 to *max_words* words, drawn with *rng*."""
    short = sorted({t for t in tgt if 0 < len(t.split()) <= max_words})
    if len(short) < lines:
        raise ValueError(f"boilerplate needs {lines} distinct target lines of at most "
                         f"{max_words} words; the corpus has {len(short)}: raise "
                         "--boilerplate-max-words or lower --boilerplate-lines")
    return [short[k] for k in rng.choice(len(short), size=lines, replace=False)]


def add_noise(src, tgt, share=0.25, mix=None, seed=1, truncate_range=(0.2, 0.6),
              partial_range=(0.3, 0.7), n_boilerplate=5, boilerplate_max_words=4,
              related_max_similarity=RELATED_MAX_SIMILARITY):
    """Corrupt round(share * len(src)) pairs.

    Args:
        src (list of str): source sentences.
        tgt (list of str): target sentences, aligned with *src*.
        share (float, optional): share of pairs to corrupt (default: 0.25).
        mix (dict, optional): weight of each kind of KINDS (default: DEFAULT_MIX).
        seed (int, optional): seed of the choice of pairs and corruptions (default: 1).
        truncate_range (tuple, optional): a truncated side keeps a uniform fraction in this
            range of its words, at least one and at least one fewer (default: (0.2, 0.6)).
        partial_range (tuple, optional): the same for a ``partial`` target without two
            clauses (default: (0.3, 0.7)).
        n_boilerplate (int, optional): distinct ``boilerplate`` targets (default: 5).
        boilerplate_max_words (int, optional): their most words (default: 4).
        related_max_similarity (float, optional): a ``related_misaligned`` neighbour's
            source cosine stays below it (default: RELATED_MAX_SIMILARITY).

    Returns:
        (list, list, list): noisy source and target sentences, and the label of each pair.
    """
    if len(src) != len(tgt):
        raise ValueError(f"the sides differ in length: {len(src)} source and {len(tgt)} "
                         "target lines")
    if not SHARE_RANGE[0] <= share <= SHARE_RANGE[1]:
        raise ValueError(f"--share {share} is out of range: use {SHARE_RANGE[0]}-"
                         f"{SHARE_RANGE[1]}")
    mix = {**dict.fromkeys(KINDS, 0.0), **(mix or parse_mix(DEFAULT_MIX))}
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
    # the other kinds take the pairs left, in the same order (no draw of rng before the
    # first kinds' corruptions: the first kinds come out as before the others existed)
    free = rest[start:]
    can_part = np.array([len(t) >= 2 for _, t in words], dtype=bool)
    chosen["partial"] = free[can_part[free]][:counts["partial"]]
    if len(chosen["partial"]) < counts["partial"]:
        raise ValueError(f"only {len(chosen['partial'])} pairs left have a target of 2+ words "
                         f"to cut; {counts['partial']} asked: lower the partial share of --mix")
    free = free[~np.isin(free, chosen["partial"])]
    chosen["boilerplate"], free = free[:counts["boilerplate"]], free[counts["boilerplate"]:]
    if len(chosen["boilerplate"]) < counts["boilerplate"]:
        raise ValueError(f"too few pairs left for {counts['boilerplate']} boilerplate pairs: "
                         "lower the boilerplate share of --mix")
    if counts["boilerplate"] and n_boilerplate < 2:
        raise ValueError(f"--boilerplate-lines {n_boilerplate}: give at least 2 (a pair whose "
                         "target is one of them gets another)")
    partner = {}
    if counts["related_misaligned"]:
        drawn, neighbour, _ = nearest_neighbours(src, tgt, free, counts["related_misaligned"],
                                                 related_max_similarity)
        chosen["related_misaligned"] = drawn
        partner = dict(zip(drawn.tolist(), neighbour.tolist()))
    else:
        chosen["related_misaligned"] = free[:0]
    out_src, out_tgt, labels = list(src), list(tgt), [CLEAN] * n
    for kind in CRAWL_KINDS:
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
    for i in map(int, np.sort(chosen["related_misaligned"])):
        out_tgt[i], labels[i] = tgt[partner[i]], "related_misaligned"
    for i in map(int, np.sort(chosen["partial"])):
        out_tgt[i], labels[i] = partial(rng, tgt[i], partial_range), "partial"
    if counts["boilerplate"]:
        lines = boilerplate_lines(rng, tgt, n_boilerplate, boilerplate_max_words)
        for k, i in enumerate(map(int, chosen["boilerplate"])):  # in the order drawn
            line = lines[k % len(lines)]
            out_tgt[i] = line if line != tgt[i] else lines[(k + 1) % len(lines)]
            labels[i] = "boilerplate"
    return out_src, out_tgt, labels


def labelled_rows(out_src, out_tgt, labels, seed):
    """The lines of ``--labelled-out``: every noisy pair and as many clean pairs, drawn
    with *seed* (a stream of its own: the noise does not change), in corpus order."""
    labels = np.asarray(labels)
    noisy, clean = np.flatnonzero(labels != CLEAN), np.flatnonzero(labels == CLEAN)
    rng = np.random.default_rng([seed, 1])
    picked = rng.choice(clean, size=min(len(noisy), len(clean)), replace=False)
    return np.sort(np.concatenate([noisy, picked]))


def write_labelled(path, src_name, tgt_name, out_src, out_tgt, labels, seed):
    """``--labelled-out``: autoassist-check-report's TSV (gzip where *path* ends in .gz)."""
    rows = labelled_rows(out_src, out_tgt, labels, seed)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "wt", encoding="utf-8", newline="\n") as f:
        f.write("\t".join([src_name, tgt_name, "label", "kind", "line"]) + "\n")
        for i in map(int, rows):
            f.write("\t".join([out_src[i].replace("\t", " "), out_tgt[i].replace("\t", " "),
                               LABEL_OF_KIND[labels[i]], labels[i], str(i + 1)]) + "\n")
    return len(rows)


def parse_cli(argv):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example:\n  python -m research.add_noise --src en --tgt de --train raw/train "
               "--out noisy/train --share 0.25 --mix misaligned=0.4,copy=0.2,wrong_lang=0.2,"
               "truncated=0.2 --seed 1\n  python -m research.add_noise --src en --tgt de "
               "--train raw/train --out noisy/train --share 0.1 --mix realistic --seed 0 "
               "--labelled-out noisy/labelled.tsv")
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
                        "the shares must sum to 1; or a named mix: " + "; ".join(
                            f"{name} = {value}" for name, value in MIXES.items()) +
                        " (default: " + ", ".join(CRAWL_KINDS) + " in equal shares)")
    p.add_argument("--seed", type=int, default=1, help="random seed (default: 1)")
    p.add_argument("--truncate-range", type=float, nargs=2, default=(0.2, 0.6),
                   metavar=("LOW", "HIGH"),
                   help="fraction of its words a truncated side keeps (default: 0.2 0.6)")
    p.add_argument("--partial-range", type=float, nargs=2, default=(0.3, 0.7),
                   metavar=("LOW", "HIGH"),
                   help="fraction of its words a partial target of one clause keeps "
                        "(default: 0.3 0.7)")
    p.add_argument("--boilerplate-lines", type=int, default=5, metavar="N",
                   help="distinct targets the boilerplate pairs share, at least 2 (default: 5)")
    p.add_argument("--boilerplate-max-words", type=int, default=4, metavar="N",
                   help="most words of a boilerplate target (default: 4)")
    p.add_argument("--related-max-similarity", type=float, default=RELATED_MAX_SIMILARITY,
                   metavar="COS",
                   help="a related_misaligned neighbour's source cosine stays below it, so that "
                        "a paraphrase of the source does not lend its translation (default: "
                        f"{RELATED_MAX_SIMILARITY})")
    p.add_argument("--labelled-out", default=None, metavar="TSV",
                   help="also write the noisy pairs and as many clean ones as a labelled TSV "
                        "for autoassist-check-report (columns SRC, TGT, label, kind, line; "
                        "gzip for .gz)")
    return p.parse_args(argv)


def main(argv=None):
    a = parse_cli(argv)
    for name, (lo, hi) in (("truncate", a.truncate_range), ("partial", a.partial_range)):
        if not 0 < lo <= hi < 1:
            raise SystemExit(f"add_noise.py: error: --{name}-range {lo} {hi}: need "
                             "0 < LOW <= HIGH < 1")
    if not 0 < a.related_max_similarity <= 1:
        raise SystemExit(f"add_noise.py: error: --related-max-similarity "
                         f"{a.related_max_similarity}: need 0 < COS <= 1")
    if a.boilerplate_max_words < 1:
        raise SystemExit(f"add_noise.py: error: --boilerplate-max-words "
                         f"{a.boilerplate_max_words}: need at least 1")
    if a.src == a.tgt:
        raise SystemExit("add_noise.py: error: --src and --tgt must differ")
    try:
        mix = parse_mix(a.mix)
    except ValueError as err:
        raise SystemExit(f"add_noise.py: error: {err}")
    src, src_path = read_lines(a.train, a.src)
    tgt, tgt_path = read_lines(a.train, a.tgt)
    try:
        out = add_noise(src, tgt, a.share, mix, a.seed, tuple(a.truncate_range),
                        tuple(a.partial_range), a.boilerplate_lines, a.boilerplate_max_words,
                        a.related_max_similarity)
    except ValueError as err:
        raise SystemExit(f"add_noise.py: error: {err} ({src_path}, {tgt_path})")
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    for lines, suffix in zip(out, (a.src, a.tgt, "labels")):
        with open(f"{a.out}.{suffix}", "w", encoding="utf-8", newline="\n") as f:
            f.writelines(line + "\n" for line in lines)
    written = [f"{a.out}.{s}" for s in (a.src, a.tgt, "labels")]
    if a.labelled_out:
        rows = write_labelled(a.labelled_out, a.src, a.tgt, *out, a.seed)
        written.append(a.labelled_out)
    counts = {k: out[2].count(k) for k in (CLEAN,) + KINDS}
    report = {"pairs": len(src), "noisy": len(src) - counts[CLEAN],
              "noisy_share": (len(src) - counts[CLEAN]) / max(1, len(src)),
              "counts": counts, "seed": a.seed, "written": written}
    if a.labelled_out:
        report["labelled_rows"] = rows
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
