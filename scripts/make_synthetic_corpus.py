#!/usr/bin/env python3
"""Generate a small synthetic parallel corpus with real structure (deterministic per seed).

The source language (``src``) is English-like: SVO order, adjectives before the noun,
English function words and invented content words. The target language (``tgt``) is
an invented German-like language:

* word order: subject - object - verb (also in relative clauses), adjectives after the
  noun, postpositions instead of prepositions, negation right before the final verb;
* agreement: every noun has a gender (m/f/n); the determiner depends on gender,
  number, definiteness and case (subject / object / after a postposition), adjectives
  take a gender/number suffix, the plural suffix of a noun depends on its gender, the
  verb ending on tense and the number of the subject, the relative pronoun on the
  gender/number of the noun it refers to;
* morphology: past tense is a prefix plus a suffix, the future an auxiliary plus an
  infinitive at the end;
* names (capitalised, rare) are copied unchanged.

Content words follow a Zipf distribution, so a few are frequent and many are rare, and
sentence patterns range from easy (``the X Ys``: short, frequent) to hard (relative
clauses, several prepositional phrases, coordination, rare words and names, up to about
40 words), so that some pairs are easy and some hard to learn.

Writes ``OUT/{train,valid,test}.{src,tgt}`` (plain UTF-8, one sentence per line).
Valid and test sentences never occur in the training set. Example::

    python scripts/make_synthetic_corpus.py --out work/demo/raw --pairs 12000 --seed 1
    bash scripts/prepare-corpus.sh --src src --tgt tgt --train work/demo/raw/train \\
        --valid work/demo/raw/valid --test work/demo/raw/test --out work/demo/data
"""

import argparse
import bisect
import itertools
import os
import random
import sys
from dataclasses import dataclass
from typing import List, Sequence, Tuple

SRC_ONSETS = ["b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "st",
              "pl", "gr", "tr", "sk"]
SRC_VOWELS = ["a", "e", "i", "o", "u", "ai", "ou", "ee"]
SRC_CODAS = ["", "", "", "n", "r", "l", "m", "x", "sh"]
TGT_ONSETS = ["b", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "w", "z", "sch",
              "ch", "kr", "fl", "st", "pf"]
TGT_VOWELS = ["a", "e", "i", "o", "u", "ä", "ö", "ü", "au", "ei", "ie"]
TGT_CODAS = ["", "", "n", "r", "l", "m", "k", "st", "ng", "tz", "ck"]

GENDERS = ("m", "f", "n")
# target determiners: (definite, number, gender) -> {case: form}; cases: nom, acc, obl
DET = {
    (True, "sg", "m"): {"nom": "dor", "acc": "dön", "obl": "dom"},
    (True, "sg", "f"): {"nom": "dia", "acc": "dia", "obl": "dür"},
    (True, "sg", "n"): {"nom": "das", "acc": "das", "obl": "dom"},
    (False, "sg", "m"): {"nom": "ain", "acc": "ainen", "obl": "ainom"},
    (False, "sg", "f"): {"nom": "aina", "acc": "aina", "obl": "ainür"},
    (False, "sg", "n"): {"nom": "ain", "acc": "ain", "obl": "ainom"},
    (True, "pl", "m"): {"nom": "dia", "acc": "dia", "obl": "dien"},
    (True, "pl", "f"): {"nom": "dia", "acc": "dia", "obl": "dien"},
    (True, "pl", "n"): {"nom": "dia", "acc": "dia", "obl": "dien"},
    (False, "pl", "m"): {"nom": "etli", "acc": "etli", "obl": "etlin"},
    (False, "pl", "f"): {"nom": "etli", "acc": "etli", "obl": "etlin"},
    (False, "pl", "n"): {"nom": "etli", "acc": "etli", "obl": "etlin"},
}
DEMONSTRATIVE = {("sg", "m"): "dieso", ("sg", "f"): "diesa", ("sg", "n"): "diese", ("pl", None): "diesi"}
ADJ_SUFFIX = {("sg", "m"): "o", ("sg", "f"): "a", ("sg", "n"): "e", ("pl", None): "i"}
NOUN_PLURAL = {"m": "en", "f": "ar", "n": "ol"}
REL_PRONOUN = {("sg", "m"): "wor", ("sg", "f"): "wia", ("sg", "n"): "was", ("pl", None): "wen"}
NUMBERS = [("two", "zwo"), ("three", "drai"), ("four", "fiar"), ("five", "fümf"), ("six", "sechs"),
           ("seven", "siem"), ("eight", "acht"), ("nine", "nain")]


@dataclass
class Noun:
    src: str
    tgt: str
    gender: str


@dataclass
class NP:
    src: List[str]
    number: str
    gender: str
    noun: Noun
    parts: dict  # what the target side needs to render the phrase in any case


class Lexicon:
    """Invented content words of both languages, drawn from the seed."""

    def __init__(self, rng: random.Random, n_nouns=320, n_adj=110, n_tverbs=90, n_iverbs=45,
                 n_adv=35, n_preps=8, n_names=160):
        self._taken = set(w for w, _ in NUMBERS) | set(t for _, t in NUMBERS)
        self.nouns = [Noun(self._word(rng, "src"), self._word(rng, "tgt"), rng.choice(GENDERS))
                      for _ in range(n_nouns)]
        self.adjectives = [(self._word(rng, "src"), self._word(rng, "tgt")) for _ in range(n_adj)]
        self.tverbs = [(self._word(rng, "src"), self._word(rng, "tgt")) for _ in range(n_tverbs)]
        self.iverbs = [(self._word(rng, "src"), self._word(rng, "tgt")) for _ in range(n_iverbs)]
        self.adverbs = [(self._word(rng, "src") + "ly", self._word(rng, "tgt") + "lich")
                        for _ in range(n_adv)]
        src_preps = ["in", "on", "with", "under", "behind", "near", "without", "above"][:n_preps]
        self.preps = [(p, self._word(rng, "tgt", 1, 1)) for p in src_preps]
        self.names = []
        for _ in range(n_names):
            name = self._word(rng, "src", 2, 3).capitalize()
            self.names.append((name, name))

    def _word(self, rng, lang, lo=1, hi=3) -> str:
        onsets, vowels, codas = ((SRC_ONSETS, SRC_VOWELS, SRC_CODAS) if lang == "src"
                                 else (TGT_ONSETS, TGT_VOWELS, TGT_CODAS))
        while True:
            n = rng.choice([k for k in range(lo, hi + 1) for _ in range(k if k < 3 else 1)])
            word = "".join(rng.choice(onsets) + rng.choice(vowels) for _ in range(n)) + rng.choice(codas)
            if word not in self._taken and len(word) > 2:
                self._taken.add(word)
                return word


class Zipf:
    """Draws items with probability proportional to 1 / rank**s."""

    def __init__(self, items: Sequence, s: float = 1.0):
        self.items = list(items)
        self.cum = list(itertools.accumulate(1.0 / (r + 1) ** s for r in range(len(self.items))))

    def __call__(self, rng: random.Random):
        return self.items[bisect.bisect_left(self.cum, rng.random() * self.cum[-1])]


class Grammar:
    def __init__(self, lex: Lexicon):
        self.lex = lex
        self.noun = Zipf(lex.nouns, 1.0)
        self.adj = Zipf(lex.adjectives, 1.0)
        self.tverb = Zipf(lex.tverbs, 0.9)
        self.iverb = Zipf(lex.iverbs, 0.9)
        self.adv = Zipf(lex.adverbs, 1.0)
        self.prep = Zipf(lex.preps, 0.7)
        self.name = Zipf(lex.names, 1.1)

    # -- noun phrases --------------------------------------------------------------------
    def np(self, rng, depth: int, hard: bool, allow_rel: bool = True) -> NP:
        if hard and rng.random() < 0.12:
            name = self.name(rng)
            return NP([name[0]], "sg", "m", None, {"name": name[1]})
        noun = self.noun(rng)
        number = "pl" if rng.random() < 0.35 else "sg"
        kind = rng.choices(["def", "indef", "dem", "num"], [0.5, 0.3, 0.12, 0.08])[0]
        if kind == "num":
            number = "pl"
        n_adj = rng.choices([0, 1, 2, 3], [0.5, 0.35, 0.12, 0.03] if hard else [0.65, 0.3, 0.05, 0])[0]
        adjs = [self.adj(rng) for _ in range(n_adj)]
        if kind == "def":
            det_src = "the"
        elif kind == "indef":
            det_src = "a" if number == "sg" else "some"
        elif kind == "dem":
            det_src = "this" if number == "sg" else "these"
        else:
            num = rng.choice(NUMBERS)
            det_src = num[0]
        noun_src = noun.src + ("s" if number == "pl" else "")
        src = [det_src] + [a[0] for a in adjs] + [noun_src]
        parts = {"kind": kind, "num": num[1] if kind == "num" else None, "adjs": [a[1] for a in adjs]}
        phrase = NP(src, number, noun.gender, noun, parts)
        if allow_rel and depth < 2 and rng.random() < (0.25 if hard else 0.0):
            self._relative(rng, phrase, depth, hard)
        return phrase

    def _relative(self, rng, head: NP, depth: int, hard: bool) -> None:
        """'the X that Vs the Y' -> 'dor X , wor dia Y V-t ,' (verb last)."""
        tense = rng.choice(["pres", "past"])
        neg = rng.random() < 0.15
        if rng.random() < 0.6:
            verb = self.tverb(rng)
            obj = self.np(rng, depth + 1, hard, allow_rel=False)
        else:
            verb, obj = self.iverb(rng), None
        src_vp, tgt_verb = self._verb(verb, tense, head.number, neg)
        head.src += ["that"] + src_vp + (obj.src if obj else [])
        rel = REL_PRONOUN[(head.number, head.gender if head.number == "sg" else None)]
        head.parts["rel"] = [",", rel] + (self.render(obj, "acc") if obj else []) + tgt_verb + [","]

    def render(self, phrase: NP, case: str) -> List[str]:
        if "name" in phrase.parts:
            return [phrase.parts["name"]]
        p, g, n = phrase.parts, phrase.gender, phrase.number
        key = (n, g if n == "sg" else None)
        if p["kind"] in ("def", "indef"):
            det = [DET[(p["kind"] == "def", n, g)][case]]
        elif p["kind"] == "dem":
            det = [DEMONSTRATIVE[key]]
        else:
            det = [p["num"]]
        noun = phrase.noun.tgt + (NOUN_PLURAL[g] if n == "pl" else "")
        adjs = [a + ADJ_SUFFIX[key] for a in p["adjs"]]
        return det + [noun] + adjs + p.get("rel", [])

    # -- verbs ---------------------------------------------------------------------------
    @staticmethod
    def _verb(verb: Tuple[str, str], tense: str, number: str, neg: bool) -> Tuple[List[str], List[str]]:
        """Source verb group (before the object) and target verb group (clause-final)."""
        s, t = verb
        if tense == "pres":
            if neg:
                src = ["does" if number == "sg" else "do", "not", s]
            else:
                src = [s + ("s" if number == "sg" else "")]
            tgt = t + ("t" if number == "sg" else "en")
        elif tense == "past":
            src = ["did", "not", s] if neg else [s + "ed"]
            tgt = "ge" + t + ("te" if number == "sg" else "ten")
        else:  # future: auxiliary after the subject, infinitive at the end
            src = ["will", "not", s] if neg else ["will", s]
            tgt = t + "en"
        tgt_group = (["nich"] if neg else []) + [tgt]
        return src, tgt_group

    # -- sentences -------------------------------------------------------------------------
    def clause(self, rng, hard: bool) -> Tuple[List[str], List[str]]:
        subj = self.np(rng, 0, hard)
        tense = rng.choices(["pres", "past", "fut"], [0.5, 0.35, 0.15])[0]
        neg = rng.random() < (0.15 if hard else 0.05)
        transitive = rng.random() < 0.65
        obj = self.np(rng, 0, hard) if transitive else None
        verb = self.tverb(rng) if transitive else self.iverb(rng)
        n_pp = rng.choices([0, 1, 2], [0.45, 0.4, 0.15] if hard else [0.8, 0.2, 0])[0]
        pps = [(self.prep(rng), self.np(rng, 1, hard, allow_rel=False)) for _ in range(n_pp)]
        adv = self.adv(rng) if rng.random() < (0.3 if hard else 0.1) else None

        src_vp, tgt_verb = self._verb(verb, tense, subj.number, neg)
        src = subj.src + src_vp + (obj.src if obj else [])
        for prep, phrase in pps:
            src += [prep[0]] + phrase.src
        if adv:
            src.append(adv[0])

        tgt = self.render(subj, "nom")
        if tense == "fut":
            tgt.append("wird" if subj.number == "sg" else "werden")
        if adv:
            tgt.append(adv[1])
        for prep, phrase in pps:
            tgt += self.render(phrase, "obl") + [prep[1]]
        if obj:
            tgt += self.render(obj, "acc")
        tgt += tgt_verb
        return src, tgt

    def sentence(self, rng) -> Tuple[str, str]:
        hard = rng.random() < 0.4
        src, tgt = self.clause(rng, hard)
        if hard and rng.random() < 0.25:
            src2, tgt2 = self.clause(rng, hard)
            conj = rng.choice([("and", "und"), ("but", "aber"), ("because", "weil")])
            src += [conj[0]] + src2
            tgt += [conj[1]] + tgt2
        src[0] = src[0][0].upper() + src[0][1:]
        tgt[0] = tgt[0][0].upper() + tgt[0][1:]
        detok = lambda ws: " ".join(ws).replace(" ,", ",").rstrip(",") + "."  # noqa: E731
        return detok(src), detok(tgt)


def generate(pairs: int, seed: int, valid: int, test: int):
    rng = random.Random(seed)
    grammar = Grammar(Lexicon(random.Random(f"lexicon-{seed}")))
    train, seen = [], set()
    while len(train) < pairs:
        src, tgt = grammar.sentence(rng)
        train.append((src, tgt))
        seen.add(src)
    held_out = []
    while len(held_out) < valid + test:
        src, tgt = grammar.sentence(rng)
        if src not in seen:
            seen.add(src)
            held_out.append((src, tgt))
    return {"train": train, "valid": held_out[:valid], "test": held_out[valid:]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example:\n  python scripts/make_synthetic_corpus.py --out work/demo/raw "
               "--pairs 12000 --seed 1")
    parser.add_argument("--out", required=True,
                        help="output directory for {train,valid,test}.{SRC,TGT}")
    parser.add_argument("--pairs", type=int, default=12000, help="training pairs (default 12000)")
    parser.add_argument("--valid", type=int, default=500, help="validation pairs (default 500)")
    parser.add_argument("--test", type=int, default=500, help="test pairs (default 500)")
    parser.add_argument("--seed", type=int, default=1,
                        help="random seed; the same seed gives the same corpus (default 1)")
    parser.add_argument("--src-lang", default="src",
                        help="file suffix of the English-like side (default src)")
    parser.add_argument("--tgt-lang", default="tgt",
                        help="file suffix of the German-like side (default tgt)")
    args = parser.parse_args(argv)

    splits = generate(args.pairs, args.seed, args.valid, args.test)
    os.makedirs(args.out, exist_ok=True)
    for split, data in splits.items():
        for side, lang in enumerate((args.src_lang, args.tgt_lang)):
            path = os.path.join(args.out, f"{split}.{lang}")
            with open(path + ".tmp", "w", encoding="utf-8", newline="\n") as f:
                f.writelines(pair[side] + "\n" for pair in data)
            os.replace(path + ".tmp", path)
    n_words = sum(len(s.split()) for s, _ in splits["train"])
    print(f"wrote {args.out}/{{train,valid,test}}.{{{args.src_lang},{args.tgt_lang}}}: "
          + ", ".join(f"{k} {len(v)}" for k, v in splits.items())
          + f" pairs (seed {args.seed}, {n_words / max(1, len(splits['train'])):.1f} source words/pair)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
