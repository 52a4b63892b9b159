"""A noise classifier learned from the corpus itself, against the union of the pair checks.

    python -m research.pair_classifier --seed 0 --out docs/results/paracrawl/pairclf-seed0.json

The cheap version of Bicleaner's recipe, without labels: a scikit-learn classifier over
per-pair features that the pair checks already compute, trained on the corpus's own pairs
(positives) against synthetic noise made from the same corpus (negatives), then scored on
every pair with cross-fitting (two folds: a pair is scored by the model fitted on the other
fold's pairs and the negatives built from them). It runs on the mix of
``autoassist-check-report`` (the 3,000 labelled ParaCrawl en-de pairs in 27,000 clean
Tatoeba + newstest pairs, prepared as ``scripts/prepare-corpus.sh``) and writes, per
configuration, the ROC AUC of V+F against A+L (dropped pairs above every score, as the
report's union), the flag rates at the bar that flags 0.5% of the mix's clean pairs that
reached the checks (a bar set from clean pairs, not from the labels), the A+L share flagged
at the V+F share the union flags, the same for the classifier OR-ed with the union, the AUC
of the mean of the two ranks (the union's margin, the classifier's P(noise)) and the median
P(noise) of each label's pairs that reached the checks.

Features (groups): ``language`` (the naive Bayes log-odds of each side being in the other
language, and each side's own-language evidence), ``lsi`` (cross-language LSI cosine),
``digits`` (digits without a counterpart, their share, the digits of each side), ``length``
(log piece ratio against the corpus median, its size, the pair's log length), ``shared``
(share of the shorter side's subwords that the other side holds), ``punct`` (punctuation
without a counterpart, and its share), ``script`` (the script check's foreign-script share),
and in the configurations "with lexical" ``lexical`` (the opt-in lexical check's two side
scores, IBM Model 1 tables of :mod:`autoassist_fairseq.checks.lexical` fitted on one fold
and scoring the other).

Negatives (kinds): ``random`` (source of one pair, target of another), ``length`` (the target
of a pair of about the same target length), ``first`` (the target of a pair whose target
starts with the same subword), ``lsi`` (the target, of 50 random pairs, nearest in LSI: the
same topic, as neighbouring lines of a page), ``copy`` (a side replaced by a copy of the
other), ``trunc`` (a side cut to 30-60% of its pieces).

A throwaway measurement (docs/results/paracrawl/README.md). The module is over 300 lines
because it is one measurement's pipeline (features, negatives, cross-fitting, calibration)
whose parts serve nothing else; the product's checks stay in ``autoassist_fairseq.features``.
On its own, the classifier did not beat the union. The mean of its rank and the union's rank
did, but a rank within the corpus is no flag rule, so the product does not include it.

    python -m research.pair_classifier --calibrated --seed 0 \
        --out docs/results/paracrawl/combined-seed0.json

puts the two scores on a scale that does not depend on the corpus before combining them,
and sets the bar on clean corpora. Each score of a pair becomes the share of the corpus's
own synthetic negatives (the default kinds) that score at most as noise-like: the union's
margin against the margins of all negatives (the default checks' columns of a negative are
rebuilt from the same naive Bayes, LSI, digits and script scores; on the corpus's own pairs
the rebuilt flags agree with ``pair_check_columns``' to the pair), the HGB P(noise) against the
negatives the scoring model did not train on (cross-fitted as above). Combinations: their
``mean``; ``fisher`` (-log(1 - share) summed: high when either score is beyond most
negatives); ``log`` and ``probit`` (the low end stretched); ``isotonic`` (each score's
P(negative | score), isotonic, fitted on the corpus's pairs against its negatives, log-odds
summed); and, for comparison only, ``rank_mean`` (the mean of the two ranks in the corpus).
Each is run on the mix and on 30,000-pair samples of Multi30k's and Tatoeba's clean train
sets (each prepared and scored as a corpus of its own); the bar is the largest of the three
99th percentiles, so that none of the three clean corpora is flagged above 1%. It writes the
ROC AUC, the flag rates at that bar (dropped pairs flagged, as in the report), the same on
the even and odd rows of the labelled file, the A+L flagged at the union's V+F and the mix's
clean pairs that bar flags, and the flag rates at the bar that flags no clean corpus more
than the union does.
"""

import json
import tempfile

import numpy as np
import scipy.sparse as sp
from scipy.stats import norm, rankdata
from sklearn.decomposition import TruncatedSVD
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.isotonic import IsotonicRegression
from sklearn.feature_extraction.text import TfidfTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.naive_bayes import MultinomialNB
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler, normalize

from autoassist_fairseq.checks import lexical
from autoassist_fairseq.checks.columns import (check_scores, digit_scores, flagged,
                                                     pair_check_columns)
from autoassist_fairseq.checks.scripts import script_scores
from autoassist_fairseq.features.tfidf import count_matrix
from autoassist_fairseq.tools import labelled_pairs, mix_preparation
from autoassist_fairseq.tools.check_figures import noise_auc
from research.bench import doc_parser

GROUPS = {"language": [0, 1, 2, 3], "lsi": [4], "digits": [5, 6, 7, 8], "length": [9, 10, 11],
          "shared": [12], "punct": [13, 14], "script": [15], "lexical": [16, 17]}
KINDS = ("random", "length", "first", "copy", "trunc")  # the default negatives
PUNCT = ".,!?:;\"'()-/%&"
GROUPS_REPORTED = ("A", "L", "A+L", "V", "F", "V+F", "MT", "E", "clean")


class PairFeatures:
    """The per-pair features of the module's docstring, fitted on a corpus (src, tgt counts
    over one joined vocabulary), for any pairs over that vocabulary."""

    def __init__(self, src, tgt, symbols):
        n, vocab = src.shape
        self.nb = MultinomialNB(alpha=1.0, fit_prior=False)
        self.nb.partial_fit(src, np.zeros(n, int), classes=[0, 1])
        self.nb.partial_fit(tgt, np.ones(n, int))
        self.ratio = (self.nb.feature_log_prob_[0] - self.nb.feature_log_prob_[1]).astype(np.float32)
        self.tfidf = [TfidfTransformer(sublinear_tf=True).fit(c) for c in (src, tgt)]
        svd = TruncatedSVD(100, random_state=0).fit(
            sp.hstack([self._tfidf(i, c) for i, c in enumerate((src, tgt))], format="csr"))
        self.maps = (svd.components_[:, :vocab].T, svd.components_[:, vocab:].T)
        lens = np.asarray(src.sum(1)).ravel(), np.asarray(tgt.sum(1)).ravel()
        self.median_log_ratio = float(np.median(np.log((lens[0] + 1) / (lens[1] + 1))))
        self.digits = np.zeros((vocab, 10), np.float32)
        self.punct = np.zeros((vocab, len(PUNCT) + 1), np.float32)
        for i, symbol in enumerate(symbols[:vocab]):
            if not any(ch.isalpha() for ch in symbol):
                for ch in symbol:
                    if "0" <= ch <= "9":
                        self.digits[i, ord(ch) - 48] += 1
            for ch in symbol:
                if not ch.isalnum() and ch != "\u2581" and not ch.isspace():
                    j = PUNCT.find(ch)
                    self.punct[i, j if j >= 0 else -1] += 1
        self.symbols = symbols

    def _tfidf(self, side, counts):
        return normalize(self.tfidf[side].transform(counts).astype(np.float32))

    def lsi(self, side, counts):
        return normalize(self._tfidf(side, counts) @ self.maps[side])

    def __call__(self, a, b, script_share):
        out = np.full((a.shape[0], 18), np.nan, np.float32)
        for col, (counts, sign) in enumerate(((a, 1), (b, -1))):
            jll = self.nb.predict_joint_log_proba(counts)
            out[:, col] = np.clip(sign * (jll[:, 1] - jll[:, 0]), -50, 50)
        shared = a.minimum(b)
        for col, (counts, sign) in zip((2, 3), ((a, 1), (b, -1))):
            own = counts - shared
            own_len = np.asarray(own.sum(1)).ravel()
            with np.errstate(invalid="ignore", divide="ignore"):
                out[:, col] = np.where(own_len >= 3, sign * (own @ self.ratio) / own_len, np.nan)
        out[:, 4] = (self.lsi(0, a) * self.lsi(1, b)).sum(1)
        da, db = np.asarray(a @ self.digits), np.asarray(b @ self.digits)
        different, ta, tb = np.abs(da - db).sum(1), da.sum(1), db.sum(1)
        out[:, 5], out[:, 6] = different, different / np.maximum(ta + tb, 1)
        out[:, 7], out[:, 8] = np.minimum(ta, tb), np.maximum(ta, tb)
        la, lb = np.asarray(a.sum(1)).ravel(), np.asarray(b.sum(1)).ravel()
        log_ratio = np.log((la + 1) / (lb + 1)) - self.median_log_ratio
        out[:, 9], out[:, 10], out[:, 11] = log_ratio, np.abs(log_ratio), np.log(la + lb + 1)
        out[:, 12] = np.asarray(shared.sum(1)).ravel() / np.maximum(np.minimum(la, lb), 1)
        qa, qb = np.asarray(a @ self.punct), np.asarray(b @ self.punct)
        out[:, 13] = np.abs(qa - qb).sum(1)
        out[:, 14] = out[:, 13] / np.maximum(qa.sum(1) + qb.sum(1), 1)
        out[:, 15] = np.nan_to_num(script_share, nan=0.0)
        return out


def lexical_tables(src, tgt, rows):
    """IBM Model 1 tables (checks.lexical) fitted on the pairs *rows*, both directions."""
    src, tgt = lexical._binary(src[rows]), lexical._binary(tgt[rows])
    tables = []
    for a, b in ((tgt, src), (src, tgt)):
        table = lexical.fit_table(a, b)
        known = (np.bincount(b.indices, minlength=b.shape[1]) >= lexical._MIN_COUNT)
        share = np.bincount(a.indices, minlength=a.shape[1]) / max(len(rows), 1)
        baseline = np.log(np.clip(share @ table, np.exp(lexical.FLOOR), 1.0)) - lexical.FLOOR
        tables.append((table, known.astype(np.float32), baseline))
    return tables


def lexical_features(src, tgt, tables):
    """The lexical check's two side scores of the pairs under *tables*."""
    src, tgt = lexical._binary(src), lexical._binary(tgt)
    return np.stack([lexical.side_scores(a, b, *t) for (a, b), t in
                     zip(((tgt, src), (src, tgt)), tables)], axis=1)


def negatives(idx, src, tgt, pieces, counts_of, lsi_tgt, first_target, kinds, rng):
    """Synthetic noise built from the pairs *idx*: (source rows, target rows), one fifth of
    len(idx) pairs per kind."""
    m, q = len(idx), len(idx) // 5
    half = q // 2
    srcs, tgts = [], []
    if "random" in kinds:
        srcs.append(src[rng.choice(idx, q)])
        tgts.append(tgt[rng.choice(idx, q)])
    if "length" in kinds:
        order = idx[np.argsort([len(pieces[1][i]) + rng.random() * 0.5 for i in idx])]
        pos = rng.choice(m - 3, q)
        srcs.append(src[order[pos]])
        tgts.append(tgt[order[pos + rng.integers(1, 3, q)]])
    if "first" in kinds:
        first = first_target[idx]
        o = np.lexsort((rng.random(m), first))
        same = np.nonzero(first[o][:-1] == first[o][1:])[0]
        pick = rng.choice(same, min(q, len(same)), replace=False)
        srcs.append(src[idx[o][pick]])
        tgts.append(tgt[idx[o][pick + 1]])
    if "lsi" in kinds:
        a, cand = rng.choice(idx, q), rng.choice(idx, (q, 50))
        sims = np.einsum("qd,qkd->qk", lsi_tgt[a], lsi_tgt[cand])
        sims[cand == a[:, None]] = -9
        srcs.append(src[a])
        tgts.append(tgt[cand[np.arange(q), sims.argmax(1)]])
    if "copy" in kinds:
        a = rng.choice(idx, q)
        srcs += [src[a[:half]], tgt[a[half:]]]
        tgts += [src[a[:half]], tgt[a[half:]]]
    if "trunc" in kinds:
        a = rng.choice(idx, q)

        def cut(side, i):
            s = pieces[side][i]
            return s[:max(1, int(len(s) * rng.uniform(0.3, 0.6)))]
        srcs += [counts_of([cut(0, i) for i in a[:half]]), src[a[half:]]]
        tgts += [tgt[a[:half]], counts_of([cut(1, i) for i in a[half:]])]
    return sp.vstack(srcs, format="csr"), sp.vstack(tgts, format="csr")


def cross_fitted(features, fold, negs, cols, model):
    """P(noise) of every pair from the model of the other fold."""
    p = np.zeros(len(features))
    for k, (idx, neg) in enumerate(negs):
        x = np.r_[features[idx][:, cols], neg[:, cols]]
        y = np.r_[np.zeros(len(idx)), np.ones(len(neg))]
        score = features[fold == k][:, cols]
        if model == "lr":
            clf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))
            x, score = np.nan_to_num(x, nan=0.0), np.nan_to_num(score, nan=0.0)
        else:
            clf = HistGradientBoostingClassifier(max_iter=200, max_leaf_nodes=15, random_state=0)
        p[fold == k] = clf.fit(x, y).predict_proba(score)[:, 1]
    return p


def rates(labels, flags):
    picks = {g: np.isin(labels, g.split("+")) for g in GROUPS_REPORTED}
    return {g: float(flags[pick].mean()) if pick.any() else None for g, pick in picks.items()}


def read_mix(data, seed):
    """The labelled pairs mixed into the clean pool as check_report mixes them (10%):
    (labelled, src lines, tgt lines, labels, row in the labelled file or -1)."""
    labelled = labelled_pairs.read_labelled(f"{data}/paracrawl-en-de-labelled/labelled.tsv.gz",
                                            "en", "de")
    clean_src, clean_tgt = labelled_pairs.read_clean([f"{data}/tatoeba-de-en/train",
                                                      f"{data}/wmt14-en-de-sample/newstest2012",
                                                      f"{data}/wmt14-en-de-sample/newstest2013"],
                                                     "en", "de")
    s, t, labels, row = labelled_pairs.mix(labelled, clean_src, clean_tgt, 0.1, seed)
    return labelled, s, t, np.asarray(labels), row


def prepared(s, t, workdir):
    """The text prepared as scripts/prepare-corpus.sh and counted over one vocabulary:
    (kept rows, source counts, target counts, symbols, pieces, vocab, counts_of), where
    counts_of turns piece lists (of the negatives) into count rows over that vocabulary."""
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        kept, pieces = mix_preparation.prepare(s, t, "en", "de", tmp, 8000, 1.5, 2000, 250)
    (src, tgt), symbols, _ = mix_preparation.joined_counts(*pieces)
    vocab = {p: i for i, p in enumerate(symbols)}

    def counts_of(sentences):
        ids = np.fromiter((vocab[p] for sent in sentences for p in sent), dtype=np.int64)
        offsets = np.cumsum([0] + [len(sent) for sent in sentences])
        return count_matrix(ids, offsets, len(vocab))

    return kept, src, tgt, symbols, pieces, vocab, counts_of


def on_every_pair(score, kept, total):
    """*score* of the kept pairs spread over all *total* pairs; dropped pairs above every
    score (the cleaning step flags them)."""
    out = np.full(total, np.inf)
    out[kept] = score
    return out


def add_lexical_by_fold(features, src, tgt, fold):
    """Fill the lexical columns of *features*: a pair's scores come from the IBM-1 table of
    the other fold. Returns the two folds' tables (the negatives of model k, built from
    the other fold's pairs, take fold k's)."""
    tables = [lexical_tables(src, tgt, np.nonzero(fold == k)[0][:25_000]) for k in range(2)]
    for k in range(2):
        features[fold == k, 16:18] = lexical_features(src[fold == k], tgt[fold == k],
                                                      tables[1 - k])
    return tables


def measure(args) -> dict:
    labelled, s, t, labels, row = read_mix(args.data, args.seed)
    kept, src, tgt, symbols, pieces, vocab, counts_of = prepared(s, t, args.workdir)
    n = src.shape[0]
    dropped = np.ones(len(labels), bool)
    dropped[kept] = False
    kept_labels = labels[kept]

    def full(score):
        return on_every_pair(score, kept, len(labels))

    checks = pair_check_columns(src, tgt, symbols=symbols)
    margin = check_scores(checks)[1]
    union = flagged(checks)
    union_full = full(np.where(union, 1.0, 0.0)) > 0.5
    valid, noise = np.isin(labels, ["V", "F"]), np.isin(labels, ["A", "L"])
    halves = [(row >= 0) & (row % 2 == parity) for parity in (0, 1)]
    union_vf = float(union_full[valid].mean())
    bicleaner = np.full(len(labels), np.nan)
    bicleaner[row >= 0] = labelled["bicleaner"][row[row >= 0]]
    out = {"seed": args.seed, "union": {"auc": noise_auc(labels, full(margin)),
                                        "flag_rate": rates(labels, union_full)},
           "bicleaner_auc": noise_auc(labels, -bicleaner), "configurations": {}}

    make = PairFeatures(src, tgt, symbols)
    features = make(src, tgt, script_scores(src, tgt, symbols, symbols, joined=True))
    lsi_tgt = make.lsi(1, tgt)
    first_target = np.array([vocab[sent[0]] if sent else -1 for sent in pieces[1]])
    rng = np.random.default_rng(args.seed)
    fold = rng.integers(2, size=n)
    tables = add_lexical_by_fold(features, src, tgt, fold)
    base_cols = sorted(c for g, cols in GROUPS.items() if g != "lexical" for c in cols)
    configs = [(m, KINDS, None) for m in ("hgb", "lr")]
    configs += [(m, k, "+lexical") for m in ("hgb", "lr") for k in (KINDS, ("length", "first"))]
    configs += [(m, KINDS, g) for m in ("hgb", "lr") for g in GROUPS if g != "lexical"]
    configs += [(m, kinds, drop) for m in ("hgb", "lr")
                for kinds, drop in ((("length", "first"), None),
                                    (("length", "first", "lsi"), None),
                                    (("length", "first", "lsi"), "lsi"),
                                    (KINDS + ("lsi",), None))]
    neg_cache = {}
    for model, kinds, drop in configs:
        if kinds not in neg_cache:
            neg_cache[kinds] = []
            for k in range(2):
                idx = np.nonzero(fold != k)[0]
                a, b = negatives(idx, src, tgt, pieces, counts_of, lsi_tgt, first_target,
                                 kinds, rng)
                share = script_scores(sp.vstack([src, a]), sp.vstack([tgt, b]), symbols,
                                      symbols, joined=True)[n:]
                neg = make(a, b, share)
                neg[:, 16:18] = lexical_features(a, b, tables[k])
                neg_cache[kinds].append((idx, neg))
        if drop == "+lexical":
            cols = base_cols + GROUPS["lexical"]
        else:
            cols = [c for c in base_cols if drop is None or c not in GROUPS[drop]]
        p = cross_fitted(features, fold, neg_cache[kinds], cols, model)
        p_full = full(p)
        bar = float(np.quantile(p[kept_labels == "clean"], 0.995))
        flags = p_full > bar
        at_union_vf = np.quantile(p_full[valid], 1.0 - union_vf)

        def at_vf(score, pick=True):
            """A+L flagged where the bar flags the union's share of V+F (of *pick*)."""
            vf = union_full[valid & pick].mean()
            bar = np.quantile(score[valid & pick], 1.0 - vf)
            return float(np.mean(score[noise & pick] > bar))
        clipped = np.clip(p, 1e-6, 1 - 1e-6)
        summed = np.maximum(margin, -20.0) + np.log(clipped / (1 - clipped))
        name = f"{model} negatives={'+'.join(kinds)}" + (
            " with lexical" if drop == "+lexical" else f" without {drop}" if drop else "")
        out["configurations"][name] = {
            "auc": noise_auc(labels, p_full), "bar": bar, "flag_rate": rates(labels, flags),
            "A+L_at_union_V+F": float(np.mean(p_full[noise] > at_union_vf)),
            "median_probability": {g: float(np.median(p[kept_labels == g]))
                                   for g in ("clean", "V", "F", "A", "L", "MT", "E")},
            "or_union_flag_rate": rates(labels, flags | union_full),
            # the mean of the two ranks (the union's margin, P(noise)): does it add to the union?
            "auc_rank_mean_with_union": noise_auc(labels, full(rankdata(margin) + rankdata(p))),
            "A+L_at_union_V+F_rank_mean": at_vf(full(rankdata(margin) + rankdata(p))),
            # the union's margin (log-odds and log scales) plus the classifier's log-odds
            # the same on the even and on the odd rows of the labelled file (held-out halves)
            "rank_mean_halves": {half: {
                "auc": noise_auc(np.where(in_half, labels, "-"),
                                 full(rankdata(margin) + rankdata(p))),
                "union_auc": noise_auc(np.where(in_half, labels, "-"), full(margin)),
                "A+L_at_union_V+F": at_vf(full(rankdata(margin) + rankdata(p)), in_half),
                "union_A+L": float(union_full[noise & in_half].mean())}
                for half, in_half in (("even", halves[0]), ("odd", halves[1]))},
            "auc_sum_with_union": noise_auc(labels, full(summed)),
            "A+L_at_union_V+F_sum": at_vf(full(summed)),
            "sum_flag_rate": rates(labels, full(summed) > np.quantile(
                summed[kept_labels == "clean"], 0.99))}
        c = out["configurations"][name]
        print(f"{name:55s} AUC {c['auc']:.3f}  A+L {c['flag_rate']['A+L']:.3f} V+F "
              f"{c['flag_rate']['V+F']:.3f}  A+L at union's V+F {c['A+L_at_union_V+F']:.3f}  "
              f"OR union A+L {c['or_union_flag_rate']['A+L']:.3f} V+F "
              f"{c['or_union_flag_rate']['V+F']:.3f}  rank mean AUC "
              f"{c['auc_rank_mean_with_union']:.3f} A+L {c['A+L_at_union_V+F_rank_mean']:.3f}"
              f"  sum AUC {c['auc_sum_with_union']:.3f} A+L {c['A+L_at_union_V+F_sum']:.3f}; "
              f"at 1% clean A+L {c['sum_flag_rate']['A+L']:.3f} V+F "
              f"{c['sum_flag_rate']['V+F']:.3f}; halves " + " ".join(
                  f"{h}: AUC {x['auc']:.3f} (union {x['union_auc']:.3f}) A+L "
                  f"{x['A+L_at_union_V+F']:.3f} (union {x['union_A+L']:.3f})"
                  for h, x in c["rank_mean_halves"].items()), flush=True)
    return out


# ---- calibrated combination: each score as its share among the corpus's own negatives ----

def check_columns(make, a, b, symbols, null, script_share):
    """The default checks' columns (checks.columns.COLUMNS) of any pairs (a, b) over
    the corpus's vocabulary, from the models *make* fitted on the corpus: the same naive
    Bayes and LSI as the checks, the p-value against *null* (sorted LSI cosines of random
    pairings of the corpus)."""
    cols = np.full((a.shape[0], 10), np.nan, np.float32)
    cols[:, 0] = make.nb.predict_proba(a)[:, 1]
    cols[:, 1] = make.nb.predict_proba(b)[:, 0]
    f = make(a, b, script_share)
    cols[:, 3] = np.minimum(np.where(np.isnan(f[:, 2]), np.inf, f[:, 2]),
                            np.where(np.isnan(f[:, 3]), np.inf, f[:, 3]))
    cols[:, 2] = (len(null) - np.searchsorted(null, f[:, 4], side="left")) / len(null)
    cols[:, 4:7] = digit_scores(a, b, symbols, symbols)
    cols[:, 9] = script_share
    return cols


def share_at_most(reference, score):
    """Per score, the share of *reference* scores at most as large (an empirical CDF)."""
    reference = np.sort(reference)
    return np.searchsorted(reference, score, side="right") / max(len(reference), 1)


def calibrated_logit(positive, negative, score, eps=1e-3):
    """log-odds of P(negative | score), isotonic in the score, fitted on the corpus's pairs'
    scores (*positive*) against its negatives' (*negative*), one weight per class."""
    x = np.clip(np.r_[positive, negative], -1e6, 1e6)
    y = np.r_[np.zeros(len(positive)), np.ones(len(negative))]
    w = np.r_[np.full(len(positive), 1 / len(positive)), np.full(len(negative), 1 / len(negative))]
    iso = IsotonicRegression(y_min=eps, y_max=1 - eps, out_of_bounds="clip").fit(x, y, w)
    p = iso.predict(np.clip(score, -1e6, 1e6))
    return np.log(p / (1 - p))


def calibrated_scores(s, t, seed, workdir, lexical_too=True):
    """Prepare the text (as scripts/prepare-corpus.sh), run the default checks, and score
    every kept pair on the negatives' scale: ``u_union`` (share of the corpus's synthetic
    negatives whose union margin is at most the pair's), ``u_clf[...]`` (the same for the
    cross-fitted HGB P(noise), against the negatives the scoring model did not train on),
    and the combinations ``mean`` (their mean) and ``fisher`` (-log(1-u) summed)."""
    kept, src, tgt, symbols, pieces, vocab, counts_of = prepared(s, t, workdir)
    n = src.shape[0]
    checks = pair_check_columns(src, tgt, symbols=symbols)
    margin = check_scores(checks)[1]
    union = flagged(checks)
    make = PairFeatures(src, tgt, symbols)
    own_share = script_scores(src, tgt, symbols, symbols, joined=True)
    features = make(src, tgt, own_share)
    rng = np.random.default_rng(seed)
    null_src = rng.integers(n, size=200_000)
    null_tgt = (null_src + rng.integers(1, n, size=200_000)) % n
    null = np.sort((make.lsi(0, src[null_src]) * make.lsi(1, tgt[null_tgt])).sum(1))
    # the reconstruction of the checks on the corpus's own pairs, against the real ones
    rebuilt = check_scores(check_columns(make, src, tgt, symbols, null, own_share))[1]
    agree = float(np.mean((rebuilt > 0) == union))
    lsi_tgt = make.lsi(1, tgt)
    first_target = np.array([vocab[sent[0]] if sent else -1 for sent in pieces[1]])
    fold = rng.integers(2, size=n)
    tables = add_lexical_by_fold(features, src, tgt, fold)
    negs, neg_margin = [], []
    for k in range(2):
        idx = np.nonzero(fold != k)[0]
        a, b = negatives(idx, src, tgt, pieces, counts_of, lsi_tgt, first_target, KINDS, rng)
        share = script_scores(sp.vstack([src, a]), sp.vstack([tgt, b]), symbols, symbols,
                              joined=True)[n:]
        neg = make(a, b, share)
        neg[:, 16:18] = lexical_features(a, b, tables[k])
        negs.append((idx, neg))
        neg_margin.append(check_scores(check_columns(make, a, b, symbols, null, share))[1])
    u_union = share_at_most(np.concatenate(neg_margin), margin)
    logit_union = calibrated_logit(margin, np.concatenate(neg_margin), margin)
    base_cols = sorted(c for g, cols in GROUPS.items() if g != "lexical" for c in cols)
    out = {"kept": kept, "union": union, "margin": margin, "u_union": u_union,
           "rebuilt_union_agreement": agree, "negative_union_flag_rate":
           float(np.mean(np.concatenate(neg_margin) > 0)), "variants": {}}
    for name, cols in (("without lexical", base_cols),
                       ("with lexical", base_cols + GROUPS["lexical"]))[:2 if lexical_too else 1]:
        u_clf, logit_clf, p_clf = np.zeros(n), np.zeros(n), np.zeros(n)
        for k, (idx, neg) in enumerate(negs):
            x = np.r_[features[idx][:, cols], neg[:, cols]]
            y = np.r_[np.zeros(len(idx)), np.ones(len(neg))]
            clf = HistGradientBoostingClassifier(max_iter=200, max_leaf_nodes=15,
                                                 random_state=0).fit(x, y)
            held_out = clf.predict_proba(negs[1 - k][1][:, cols])[:, 1]  # not trained on
            p_k = clf.predict_proba(features[fold == k][:, cols])[:, 1]
            u_clf[fold == k], p_clf[fold == k] = share_at_most(held_out, p_k), p_k
            logit_clf[fold == k] = calibrated_logit(p_k, held_out, p_k)
        eps = 1e-4
        out["variants"][name] = {
            "u_clf": u_clf, "mean": (u_union + u_clf) / 2,
            # for comparison, not a corpus-independent scale: the mean of the two ranks
            "rank_mean": (rankdata(margin) + rankdata(p_clf)) / (2 * n),
            "fisher": -np.log(1 - u_union + eps) - np.log(1 - u_clf + eps),
            # the low end stretched, as a rank does: log of each share, summed (log u1 u2)
            "log": np.log(u_union + eps) + np.log(u_clf + eps),
            # P(negative | score) of each score, fitted on the corpus's pairs against its
            # negatives (isotonic), log-odds summed (naive Bayes over the two scores)
            "isotonic": logit_union + logit_clf,
            "probit": norm.ppf(np.clip(u_union, eps, 1 - eps))
            + norm.ppf(np.clip(u_clf, eps, 1 - eps))}
    return out


def measure_calibrated(args) -> dict:
    """The calibrated combinations on the labelled mix and on two clean corpora (see main)."""
    D = args.data
    labelled, s, t, labels, row = read_mix(D, args.seed)
    mix = calibrated_scores(s, t, args.seed, args.workdir)
    kept = mix["kept"]
    kept_labels = labels[kept]

    def full(score):
        return on_every_pair(score, kept, len(labels))

    clean = {"mix": {}}
    for name, prefix in (("multi30k", f"{D}/multi30k-en-de/train"),
                         ("tatoeba", f"{D}/tatoeba-de-en/train")):
        cs, ct = labelled_pairs.read_clean([prefix], "en", "de")
        pick = np.random.default_rng(args.seed).choice(len(cs), min(len(cs), 30_000),
                                                       replace=False)
        res = calibrated_scores([cs[i] for i in pick], [ct[i] for i in pick], args.seed,
                                args.workdir)
        clean[name] = {"pairs": len(pick), "kept": len(res["kept"]), "res": res}
        print(f"{name}: union flags {res['union'].mean():.4f}, rebuilt checks agree "
              f"{res['rebuilt_union_agreement']:.4f}", flush=True)
    union_full = full(np.where(mix["union"], 1.0, 0.0)) > 0.5
    valid = np.isin(labels, ["V", "F"])
    mix_clean_union = float(mix["union"][kept_labels == "clean"].mean())
    out = {"seed": args.seed, "union": {"auc": noise_auc(labels, full(mix["margin"])),
                                        "clean_at_union_V+F": mix_clean_union,
                                        "auc_u_union": noise_auc(labels, full(mix["u_union"])),
                                        "flag_rate": rates(labels, union_full),
                                        "clean_flag_rate": {
                                            "mix": mix_clean_union,
                                            **{c: float(clean[c]["res"]["union"].mean())
                                               for c in ("multi30k", "tatoeba")}}},
           "rebuilt_union_agreement": mix["rebuilt_union_agreement"],
           "negative_union_flag_rate": mix["negative_union_flag_rate"],
           "clean_corpora": {c: {"pairs": clean[c]["pairs"], "kept": clean[c]["kept"]}
                             for c in ("multi30k", "tatoeba")}, "variants": {}}
    halves = [(row >= 0) & (row % 2 == parity) for parity in (0, 1)]
    for variant in mix["variants"]:
        for combo in ("u_clf", "mean", "fisher", "log", "probit", "isotonic", "rank_mean"):
            score = mix["variants"][variant][combo]
            q99 = {"mix": float(np.quantile(score[kept_labels == "clean"], 0.99))}
            q99.update({c: float(np.quantile(clean[c]["res"]["variants"][variant][combo], 0.99))
                        for c in ("multi30k", "tatoeba")})
            bar = max(q99.values())  # flags at most 1% of each clean corpus
            clean_pairs = [(score[kept_labels == "clean"], mix["union"][kept_labels == "clean"])]
            clean_pairs += [(clean[c]["res"]["variants"][variant][combo], clean[c]["res"]["union"])
                            for c in ("multi30k", "tatoeba")]
            flags = full(score) > bar
            vf = union_full[valid].mean()
            at_vf = np.quantile(full(score)[valid], 1.0 - vf)
            c = out["variants"][f"{variant} {combo}"] = {
                "auc": noise_auc(labels, full(score)), "bar_1pct_clean": q99, "bar": bar,
                "flag_rate": rates(labels, flags),
                "clean_flag_rate": {"mix": float(np.mean(score[kept_labels == "clean"] > bar)),
                                    **{k: float(np.mean(clean[k]["res"]["variants"][variant][combo]
                                                        > bar)) for k in ("multi30k", "tatoeba")}},
                "A+L_at_union_V+F": float(np.mean(full(score)[np.isin(labels, ["A", "L"])]
                                                  > at_vf)),
                # at the bar that flags as many of each clean corpus as the union does (the
                # largest such bar over the three: none flagged more than by the union)
                "at_union_clean_rate": rates(labels, full(score) > max(
                    np.quantile(sc, 1.0 - float(np.mean(un))) for sc, un in clean_pairs)),
                # what that costs: the mix's clean pairs (that reached the checks) flagged
                "clean_at_union_V+F": float(np.mean(score[kept_labels == "clean"] > at_vf)),
                "halves": {h: {"auc": noise_auc(np.where(m, labels, "-"), full(score)),
                               "flag_rate": rates(np.where(m, labels, "-"), flags),
                               "union_flag_rate": rates(np.where(m, labels, "-"), union_full)}
                           for h, m in (("even", halves[0]), ("odd", halves[1]))}}
            print(f"{variant} {combo:7s} AUC {c['auc']:.3f} bar {bar:.3f} "
                  f"({', '.join(f'{k} {v:.3f}' for k, v in q99.items())}) A+L "
                  f"{c['flag_rate']['A+L']:.3f} V+F {c['flag_rate']['V+F']:.3f} L "
                  f"{c['flag_rate']['L']:.3f} A+L at union V+F {c['A+L_at_union_V+F']:.3f} (clean "
                  f"{c['clean_at_union_V+F']:.4f}); at union's clean rates A+L "
                  f"{c['at_union_clean_rate']['A+L']:.3f} V+F "
                  f"{c['at_union_clean_rate']['V+F']:.3f}; "
                  f"halves AUC {c['halves']['even']['auc']:.3f}/{c['halves']['odd']['auc']:.3f}",
                  flush=True)
    return out


def main(argv=None):
    parser = doc_parser(__doc__, 1)
    parser.add_argument("--seed", type=int, default=0, help="of the mix, folds and negatives")
    parser.add_argument("--data", default="/work/shared/data", help="the shared data folder")
    parser.add_argument("--workdir", default=None, help="folder for the prepared text")
    parser.add_argument("--out", required=True, help="the JSON to write")
    parser.add_argument("--calibrated", action="store_true",
                        help="measure the calibrated combinations instead (combined-seedN.json)")
    args = parser.parse_args(argv)
    if args.calibrated:
        out = measure_calibrated(args)
        print(f"union AUC {out['union']['auc']:.3f} A+L {out['union']['flag_rate']['A+L']:.3f} "
              f"V+F {out['union']['flag_rate']['V+F']:.3f} clean {out['union']['clean_flag_rate']}")
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)
        return
    out = measure(args)
    print(f"union AUC {out['union']['auc']:.3f} A+L {out['union']['flag_rate']['A+L']:.3f} "
          f"V+F {out['union']['flag_rate']['V+F']:.3f}; Bicleaner AUC {out['bicleaner_auc']:.3f}")
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
