import json
import shutil

import numpy as np
import pytest
import scipy.sparse as sp

from autoassist_fairseq.assistant import Assistant, AssistantHParams
from autoassist_fairseq.checks.columns import (COLUMNS, FLAG_PROBABILITY,
                                                     PairCheckSettings, check_languages_differ,
                                                     check_scores, digit_scores, flag_counts,
                                                     flagged, pair_check_columns,
                                                     settings_from_args)
from autoassist_fairseq.checks.language import (language_scores,
                                                        other_language_probability)
from autoassist_fairseq.checks.lexical import LEXICAL_BAR, lexical_scores
from autoassist_fairseq.checks.unrelated import lsi_components, unrelated_p_value
from autoassist_fairseq.features.store import FeatureStore, feature_prefix
from autoassist_fairseq.features.tfidf import count_matrix, tfidf_features
from utils import TINY_TRANSFORMER, read_trace, run, train_args

CLEAN, COPY, WRONG_LANG, MISALIGNED, SHARED_ONLY = range(5)
VOCAB = 300


def _sentence(rng, low, high):
    """Words of one language (ids in [low, high)), with a name or number both share."""
    words = list(rng.integers(low, high, size=rng.integers(4, 14)))
    words.insert(int(rng.integers(len(words) + 1)), int(rng.integers(4, 20)))
    return np.array(words)


def _translate(rng, source, offset):
    """A clean target: each source word's translation (word + *offset*, names and numbers
    kept), in another order, one word in five replaced by a random target word."""
    words = np.where(source >= 20, source + offset, source)
    swap = (rng.random(len(words)) < 0.2) & (source >= 20)
    words[swap] = rng.integers(20 + offset, 150 + offset, size=int(swap.sum()))
    return rng.permutation(words)


def _corpus(n=2000, seed=0, same_language=False):
    """Source words in [20, 150), target words in [150, 280) (or [20, 150) too), the target a
    translation of the source; 10% copies, 8% wrong-language targets (another pair's
    source), 8% misaligned (another pair's target: the right language), 3% short targets of
    shared names and numbers only."""
    rng = np.random.default_rng(seed)
    src = [_sentence(rng, 20, 150) for _ in range(n)]
    clean_tgt = [_translate(rng, s, 0 if same_language else 130) for s in src]
    kind = rng.choice(5, size=n, p=[0.71, 0.10, 0.08, 0.08, 0.03])
    other = rng.permutation(n)
    tgt = [src[i] if k == COPY else src[other[i]] if k == WRONG_LANG
           else clean_tgt[other[i]] if k == MISALIGNED
           else rng.integers(4, 20, size=2) if k == SHARED_ONLY else clean_tgt[i]
           for i, k in enumerate(kind)]

    def counts(sents):
        return count_matrix(np.concatenate(sents), np.cumsum([0] + [len(s) for s in sents]), VOCAB)
    return counts(src), counts(tgt), kind


def test_language_check_flags_copies_and_wrong_language_targets_only():
    src, tgt, kind = _corpus()
    p = other_language_probability(src, tgt)
    assert p.shape == (len(kind), 2) and p.dtype == np.float32
    flags = (p > FLAG_PROBABILITY).any(axis=1)
    wrong = np.isin(kind, [COPY, WRONG_LANG])
    assert flags[wrong].mean() > 0.98  # the target side is in the source language
    # clean, misaligned (right language) and name-only targets are left alone
    assert flags[~wrong].mean() < 0.01
    assert flags[kind == MISALIGNED].mean() < 0.02
    assert (p[kind == SHARED_ONLY, 1] < FLAG_PROBABILITY).all()
    # the source side is never the one in the wrong language here
    assert (p[:, 0] < FLAG_PROBABILITY).mean() > 0.99
    check_languages_differ(p)  # two languages: no error


def test_unrelated_check_flags_misaligned_pairs_and_few_translations():
    src, tgt, kind = _corpus()
    p = unrelated_p_value(src, tgt)
    assert p.shape == (len(kind),) and p.dtype == np.float32
    assert p.min() >= 0 and p.max() <= 1
    # at a bar of 0.1 (the default, 0.3, flags fewer: a random pairing with probability 0.7)
    unrelated = p > 0.1
    # (below the 85% of noisy Multi30k: here a fifth of the random pairings that make the
    # reference have a target outside the target language, so they look less alike)
    assert unrelated[kind == MISALIGNED].mean() > 0.6
    assert unrelated[kind == CLEAN].mean() < 0.02
    # a translation is more alike than nearly every random pairing, a misaligned pair is not
    assert np.quantile(p[kind == CLEAN], 0.95) < 0.02 < 0.15 < np.median(p[kind == MISALIGNED])
    # the same draws give the same p-values; a corpus too small to compare gives none
    np.testing.assert_array_equal(p, unrelated_p_value(src, tgt))
    np.testing.assert_array_equal(unrelated_p_value(src[:2], tgt[:2]), [0, 0])


@pytest.mark.parametrize("shape", [(600, 80), (60, 300)])  # tall; wide (transposed inside)
def test_lsi_components_are_truncated_svds_to_the_bit(shape):
    """The unrelated check's components are scikit-learn's TruncatedSVD's, byte for byte (the
    check computes them without the projection that fit adds)."""
    from sklearn.decomposition import TruncatedSVD


    rng = np.random.default_rng(3)
    rows = sp.random(*shape, density=0.1, format="csr", dtype=np.float32, random_state=rng)
    for k, seed in ((10, 0), (20, 7)):
        want = TruncatedSVD(k, random_state=seed).fit(rows).components_
        got = lsi_components(rows, k, seed)
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


def test_all_checks_together():
    src, tgt, kind = _corpus()
    checks = pair_check_columns(src, tgt)
    assert checks.shape == (len(kind), len(COLUMNS)) and checks.dtype == np.float32
    assert np.isnan(checks[:, 4:7]).all()  # no subword text: the digits check cannot run
    settings = PairCheckSettings(unrelated_p_value=0.1)
    flags = flagged(checks, settings)
    assert flags[np.isin(kind, [COPY, WRONG_LANG])].mean() > 0.98
    assert flags[kind == MISALIGNED].mean() > 0.6
    assert flags[kind == CLEAN].mean() < 0.02
    # the union's margin is above 0 exactly where a check flags
    np.testing.assert_array_equal(check_scores(checks, settings)[1] > 0, flags)
    # a check left out neither runs nor flags
    only = PairCheckSettings(checks=("unrelated",), unrelated_p_value=0.1)
    assert np.isnan(pair_check_columns(src, tgt, settings=only)[:, [0, 1, 3]]).all()
    assert not flagged(pair_check_columns(src, tgt, settings=only), only)[kind == COPY].any()
    # the lexical check is opt-in: its columns stay empty unless --pair-checks names it
    assert np.isnan(checks[:, COLUMNS.index("source_translation_score")]).all()
    counts = flag_counts(checks, settings)
    assert counts["flagged"] == flags.sum()
    assert max(counts["wrong_language"], counts["unrelated"], counts["lexical"]) \
        <= counts["flagged"] <= counts["wrong_language"] + counts["unrelated"] + counts["lexical"]


def test_language_evidence_flags_a_side_in_a_third_language():
    """A side in a third language (its subwords as common in one language of the corpus as in
    the other, as many Spanish pieces are under a joint English-German BPE; here the ids of the
    names that both sides share) has no evidence of its own language: P(other language) is
    not flagged, while the mean evidence of its unshared subwords sits near 0, far below a
    real sentence's."""
    src, tgt, kind = _corpus()
    rng = np.random.default_rng(5)
    third = np.zeros(len(kind), dtype=bool)
    third[rng.choice(np.where(kind == CLEAN)[0], 100, replace=False)] = True
    tgt = tgt.tolil()
    for i in np.where(third)[0]:  # subwords of neither language: the names' ids, not in src
        tgt[i] = 0
        for w in rng.choice(np.setdiff1d(np.arange(4, 20), src[i].indices), 6, replace=False):
            tgt[i, w] += 1
    tgt = tgt.tocsr()
    scores = language_scores(src, tgt)
    evidence, clean = scores[:, 2], (kind == CLEAN) & ~third
    assert np.quantile(evidence[clean], 0.01) > 1.0  # a real sentence: far from 0
    assert abs(np.median(evidence[third])) < 0.5
    assert (scores[third, 1] > FLAG_PROBABILITY).mean() < 0.2  # the old check misses them
    # a side of a name or two (as often the other side's as not) is left alone
    assert (evidence[kind == SHARED_ONLY] > 0.5).all()
    # (here the names are a little more frequent on the target side, so the evidence of
    # this third language sits just above the default bar 0; the bar is a setting)
    for bar, third_share in ((0.0, 0.0), (0.5, 0.95)):
        settings = PairCheckSettings(checks=("language",), language_evidence=bar)
        flags = flagged(pair_check_columns(src, tgt, settings=settings), settings)
        assert flags[third].mean() >= third_share and flags[clean].mean() < 0.01
        assert flags[kind == COPY].all()


def test_digits_check_flags_other_numbers_not_other_formats():
    symbols = ["<s>", "<pad>", "</s>", "<unk>", "\u2581incl", "\u2581inkl", "\u25811,914.00",
               "\u25811.914,00", "\u258178.00", "\u258152.00", "\u25812", "\u2581zwei",
               "\u258119%", "\u2581fifty", "\u258150", "3", "\u25812017"]
    sid = {s: i for i, s in enumerate(symbols)}

    def rows(sentences):
        ids = [[sid[w] for w in s.split()] for s in sentences]
        return count_matrix(np.concatenate(ids), np.cumsum([0] + [len(x) for x in ids]),
                            len(symbols))
    w = "\u2581"
    src = rows([f"{w}incl {w}1,914.00", f"{w}incl {w}78.00", f"{w}incl {w}2",
                f"{w}fifty {w}incl", f"{w}incl {w}2 3", f"{w}incl {w}19% {w}78.00",
                f"{w}incl {w}2017"])
    tgt = rows([f"{w}inkl {w}1.914,00", f"{w}inkl {w}52.00", f"{w}inkl {w}zwei",
                f"{w}50 {w}inkl", f"{w}inkl {w}2", f"{w}inkl {w}19% {w}52.00", f"{w}inkl"])
    scores = digit_scores(src, tgt, symbols, symbols)
    np.testing.assert_array_equal(scores[:, 0], [0, 4, 1, 2, 1, 4, 4])
    np.testing.assert_array_equal(scores[:, 1:].sum(1), [12, 8, 1, 2, 3, 12, 4])
    checks = np.concatenate([np.full((len(scores), 4), np.nan, np.float32), scores], axis=1)
    # other prices and a year on one side only flag; the same number in another format, a
    # number spelt out on one side, one digit more, and 4 different digits of 12 do not
    np.testing.assert_array_equal(check_scores(checks)[0]["digits"][1],
                                  [False, True, False, False, False, False, True])
    wider = PairCheckSettings(digits_share=0.3, digits_one_side=5)
    np.testing.assert_array_equal(check_scores(checks, wider)[0]["digits"][1],
                                  [False, True, False, False, False, True, False])
    # the union's margin is above 0 exactly where the digits check flags: also for the
    # number spelt out on one side (all of its 1 digit different, not flagged)
    for settings in (None, wider):
        per_check, margin = check_scores(checks, settings)
        np.testing.assert_array_equal(margin > 0, per_check["digits"][1])


def test_union_margin_is_above_0_exactly_where_the_digits_check_flags():
    """Rows of digit columns (different, source digits, target digits), both-sided and
    one-sided, at and around every bar: the union's margin is > 0 exactly where the digits
    check flags, whatever the share of different digits (1 on a one-sided pair)."""
    digits = COLUMNS.index("digits_different")
    assert COLUMNS[digits + 1:digits + 3] == ("source_digits", "target_digits")
    rows = [(d, a, b) for a in range(7) for b in range(7) for d in range(a + b + 1)]
    assert (3, 3, 0) in rows and (1, 0, 1) in rows  # one-sided, below the one-sided bar
    checks = np.full((len(rows), len(COLUMNS)), np.nan, np.float32)
    checks[:, digits:digits + 3] = rows
    for settings in (PairCheckSettings(), PairCheckSettings(digits_share=0.3, digits_one_side=5),
                     PairCheckSettings(digits_min_different=1, digits_share=0.8,
                                       digits_one_side=2)):
        per_check, margin = check_scores(checks, settings)
        flags = per_check["digits"][1]
        assert flags.any() and not flags.all()
        assert not flags[rows.index((3, 3, 0))] or settings.digits_one_side <= 3
        np.testing.assert_array_equal(margin > 0, flags)
        np.testing.assert_array_equal(margin > 0, flagged(checks, settings))


def _lexical_flags(scores, settings=None):
    checks = np.full((len(scores), len(COLUMNS)), np.nan, np.float32)
    checks[:, 7:9] = scores
    return check_scores(checks, settings)[0]["lexical"][1]


def test_lexical_check_flags_misaligned_pairs_not_their_translations():
    """The IBM Model 1 tables, fitted on the corpus itself, explain a translation's words
    and not those of another pair's target (in the right language, which the language check
    lets pass); a copy has no words of its own to score and is left to the language check."""
    src, tgt, kind = _corpus(n=1000)
    scores = lexical_scores(src, tgt)
    assert scores.shape == (len(kind), 2) and scores.dtype == np.float32
    flags = _lexical_flags(scores)
    assert flags[kind == MISALIGNED].mean() > 0.7 and flags[kind == WRONG_LANG].mean() > 0.5
    assert flags[kind == CLEAN].mean() < 0.01
    assert np.isnan(scores[kind == COPY]).all() and not flags[kind == COPY].any()
    # 20 sources, their translations and then other pairs' translations: those pairs score
    # below a random pairing's 0 and most are flagged, the other translations stay unflagged
    clean = np.flatnonzero((kind == CLEAN) & ~flags)
    moved, donors = clean[:20], clean[20:40]
    swapped = tgt.tolil()
    swapped[moved] = tgt[donors]
    again = lexical_scores(src, swapped.tocsr())
    assert (np.fmin(*scores[moved].T) > 0).all() and (np.fmin(*again[moved].T) < 0).all()
    assert _lexical_flags(again)[moved].sum() >= 10
    assert _lexical_flags(again)[clean[40:]].mean() < 0.01
    # the same sample gives the same scores; the bar moves the flags
    np.testing.assert_array_equal(scores, lexical_scores(src, tgt))
    strict = PairCheckSettings(lexical_bar=LEXICAL_BAR - 10)
    assert not _lexical_flags(scores, strict).any()
    # two dictionaries: nothing is taken for copied across, the misaligned still flag
    assert _lexical_flags(lexical_scores(src, tgt, joined=False))[kind == MISALIGNED].mean() > 0.7


def test_lexical_settings_are_options_recorded_in_the_header(tmp_path):
    from autoassist_fairseq.features import build
    from autoassist_fairseq.tools import check_report
    for parser in (build.get_parser(), check_report.get_parser()):
        text = parser.format_help()
        assert "--lexical-bar" in text and f"default: {LEXICAL_BAR}" in text
        assert "default: language,unrelated,digits,script,langid)" in " ".join(text.split())  # lexical: opt-in
    args = build.get_parser().parse_args(["data", "-s", "en", "-t", "de", "--lexical-bar", "-1",
                                          "--pair-checks", "language,lexical"])
    settings = settings_from_args(args)
    assert settings.lexical_bar == -1.0 and settings.checks == ("language", "lexical")
    src, tgt, kind = _corpus(n=600)
    checks = pair_check_columns(src, tgt, settings=settings)
    assert np.isnan(checks[:, 2]).all() and not np.isnan(checks[:, 7:9]).all()
    prefix = str(tmp_path / "f")
    FeatureStore.save(prefix, tfidf_features(src, tgt), {}, pair_check_columns=checks,
                      pair_check_settings=settings)
    store = FeatureStore.open(prefix)
    header = store.meta["pair_checks"]
    assert header["settings"]["lexical_bar"] == -1.0 and "lexical" in header["settings"]["checks"]
    assert header["columns"][7:9] == ["source_translation_score", "target_translation_score"]
    assert store.pair_check_settings() == settings
    np.testing.assert_array_equal(store.suspect_pairs(), flagged(checks, settings))
    assert header["lexical"] == int(_lexical_flags(checks[:, 7:9], settings).sum()) > 0
    # a file of the previous autoassist-features (7 columns): read without the lexical check
    np.save(prefix + ".pair-checks.npy", checks[:, :7].copy())
    assert np.isnan(store.pair_check_columns()[:, 7:]).all()
    np.testing.assert_array_equal(store.suspect_pairs(),
                                  flagged(np.pad(checks[:, :7], ((0, 0), (0, 2)),
                                                 constant_values=np.nan), settings))


def test_sides_of_one_language_are_refused():
    src, tgt, _ = _corpus(n=1000, same_language=True)
    p = other_language_probability(src, tgt)
    with pytest.raises(ValueError, match="do not look like two languages.*--assistant-pair-checks off"):
        check_languages_differ(p, "corpus X")


def test_sides_need_one_vocabulary():
    src, tgt, _ = _corpus(n=50)
    with pytest.raises(ValueError, match="--joined-dictionary"):
        other_language_probability(src, tgt[:, :100])


def test_two_dictionaries_run_the_unrelated_check_only(tmp_path):
    """With separate dictionaries a column is not the same subword on both sides: the
    language columns stay NaN (never flagged, not refused as one language) and the
    unrelated-sides check, which compares each side in its own columns, still flags."""
    src, tgt, kind = _corpus(n=2000)
    joined = pair_check_columns(src, tgt)
    separate = pair_check_columns(src, tgt, languages=False)
    assert separate.dtype == np.float32 and np.isnan(separate[:, [0, 1, 3]]).all()
    np.testing.assert_array_equal(separate[:, 2], joined[:, 2])
    check_languages_differ(separate)  # nothing to check: no error
    assert not flagged(separate)[kind == COPY].any()  # copies need the language check
    settings = PairCheckSettings(unrelated_p_value=0.1)
    assert flagged(separate, settings)[kind == MISALIGNED].mean() > 0.6
    FeatureStore.save(str(tmp_path / "f"), tfidf_features(src, tgt), {},
                      pair_check_columns=separate, pair_check_settings=settings)
    store = FeatureStore.open(str(tmp_path / "f"))
    assert store.meta["pair_checks"]["languages"] is False
    assert store.meta["pair_checks"]["wrong_language"] == 0
    # the header records the settings, and the store flags by them
    assert store.meta["pair_checks"]["settings"]["unrelated_p_value"] == 0.1
    np.testing.assert_array_equal(store.suspect_pairs(), flagged(separate, settings))


def _store(tmp_path, n=2000, checks=True):
    src, tgt, kind = _corpus(n=n)
    tmp_path.mkdir(parents=True, exist_ok=True)
    prefix = str(tmp_path / "f")
    FeatureStore.save(prefix, tfidf_features(src, tgt), {"fingerprint": "x"},
                      pair_check_columns=pair_check_columns(src, tgt) if checks else None)
    return FeatureStore.open(prefix, rebuild_hint="REBUILD-CMD"), kind


def test_store_keeps_the_checks_and_names_the_rebuild_when_missing(tmp_path):
    store, kind = _store(tmp_path / "a")
    suspect = store.suspect_pairs()
    assert suspect.dtype == bool and len(suspect) == store.num_rows
    np.testing.assert_array_equal(suspect, flagged(np.load(store.prefix + ".pair-checks.npy")))
    assert store.meta["pair_checks"]["flagged"] == int(suspect.sum())
    # a file of the previous autoassist-features (three columns, no settings in its header):
    # read with the checks and bar of its time
    old3 = np.load(store.prefix + ".pair-checks.npy")[:, :3].copy()
    np.save(store.prefix + ".pair-checks.npy", old3)
    del store.meta["pair_checks"]["settings"]
    np.testing.assert_array_equal(store.suspect_pairs(), (old3[:, :2] > 0.99).any(1) | (old3[:, 2] > 0.1))
    # a file of an older autoassist-features (two columns, no unrelated-pair check)
    np.save(store.prefix + ".pair-checks.npy", np.zeros((store.num_rows, 2), np.float32))
    with pytest.raises(ValueError, match="older autoassist-features wrote 2 columns.*REBUILD-CMD"):
        store.suspect_pairs()
    old, _ = _store(tmp_path / "b", checks=False)  # a file built before pair checks
    with pytest.raises(FileNotFoundError, match="no pair checks.*REBUILD-CMD"):
        old.suspect_pairs()
    with pytest.raises(ValueError, match="do not fit"):
        FeatureStore.save(str(tmp_path / "c"), tfidf_features(*_corpus(n=20)[:2]), {},
                          pair_check_columns=np.zeros((19, len(COLUMNS)), np.float32))


@pytest.mark.parametrize("rule", ["paper", "learnable", "noise"])
def test_flagged_pairs_are_at_the_floor_from_the_first_window(tmp_path, rule):
    store, kind = _store(tmp_path)
    suspect = store.suspect_pairs()
    ids = np.arange(store.num_rows)
    plain = Assistant(store, AssistantHParams(rule=rule, lambda_max=0.8))
    checked = Assistant(store, AssistantHParams(rule=rule, lambda_max=0.8), suspect)
    for a in (plain, checked):  # before any loss and after some
        rng = np.random.default_rng(0)
        for _ in range(30):
            batch = rng.choice(ids, 64, replace=False)
            a.learn(batch, rng.uniform(1, 8, 64))
    for a in (plain, checked):
        a.schedule.lam = 0.5
    p_plain, p_checked = plain.accept_probability(ids), checked.accept_probability(ids)
    np.testing.assert_allclose(p_checked[suspect], np.minimum(p_plain[suspect], 0.2))
    np.testing.assert_allclose(p_checked[~suspect], p_plain[~suspect])
    fresh = Assistant(store, AssistantHParams(rule=rule, lambda_max=0.8), suspect)
    p0 = fresh.accept_probability(ids)
    np.testing.assert_allclose(p0[suspect], 0.2)
    np.testing.assert_allclose(p0[~suspect], 1.0)


def _write_copies(raw, split, n, seed):
    """Toy pairs (s-words -> t-words) of which every fifth has its source copied as target."""
    rng = np.random.default_rng(seed)
    raw.mkdir(parents=True, exist_ok=True)
    copies = []
    with open(raw / f"{split}.src", "w") as fs, open(raw / f"{split}.tgt", "w") as ft:
        for i in range(n):
            words = rng.integers(0, 100, size=rng.integers(4, 12))
            source = " ".join(f"s{w}" for w in words)
            copy = i % 5 == 0 and split == "train"
            fs.write(source + "\n")
            ft.write((source if copy else " ".join(f"t{(w * 7) % 100}" for w in words)) + "\n")
            copies.append(copy)
    return np.array(copies)


def test_features_command_flags_copies_and_training_skips_them(tmp_path):
    raw, data = tmp_path / "raw", tmp_path / "data-bin"
    copies = _write_copies(raw, "train", 500, 0)
    _write_copies(raw, "valid", 40, 1)
    run(["fairseq-preprocess", "--source-lang", "src", "--target-lang", "tgt",
         "--trainpref", raw / "train", "--validpref", raw / "valid", "--destdir", data,
         "--joined-dictionary", "--workers", "1"])
    out = run(["autoassist-features", data, "--source-lang", "src", "--target-lang", "tgt"])
    assert f"{copies.sum()} with a side in the wrong language" in out.stdout + out.stderr
    store = FeatureStore.open(feature_prefix(str(data), "train", "src", "tgt"))
    suspect = store.suspect_pairs()
    # every copy; a few translations among 500 toy pairs carry too little evidence
    assert suspect[copies].all() and suspect[~copies].mean() < 0.1
    trace = tmp_path / "trace"
    # pair checks by default, when the file has them (the noise rule skips nothing else)
    proc = run(train_args(data, tmp_path / "ckpt", TINY_TRANSFORMER,
                          extra=["--max-epoch", "3", "--assistant-rule", "noise",
                                 "--assistant-trace-dir", trace, "--no-save"]))
    assert f"AutoAssist pair checks: {suspect.sum()} pairs" in proc.stdout + proc.stderr
    trained = np.zeros(len(copies))
    for _, _, ids in read_trace(trace):
        np.add.at(trained, ids, 1)
    # 3 epochs: every other pair about 3 times, a flagged one at the floor 1 - 0.9 of that
    assert trained[~suspect].mean() > 2.0
    assert trained[copies].mean() < 0.3 * trained[~suspect].mean()


def test_a_file_without_pair_checks_stops_a_run_that_requires_them_only(tiny_data, tmp_path):
    copy = tmp_path / "data"
    shutil.copytree(tiny_data, copy)
    # as built before the checks: no array, and a header that does not list it (a header
    # that lists a missing array is a damaged file set: tests/test_bad_inputs.py)
    (copy / "train.src-tgt.autoassist.pair-checks.npy").unlink()
    header = copy / "train.src-tgt.autoassist.json"
    meta = json.loads(header.read_text())
    del meta["pair_checks"]
    header.write_text(json.dumps(meta))

    def train(name, *flags):
        proc = run(train_args(copy, tmp_path / name, extra=["--max-update", "5", "--no-save",
                                                            *flags]), check=False, timeout=120)
        return proc.returncode, proc.stdout + proc.stderr

    code, out = train("required", "--assistant-pair-checks", "require")
    assert code != 0
    assert "has no pair checks" in out and "autoassist-features" in out
    assert "num_updates" not in out  # no training step ran
    code, out = train("default")  # by default: a warning that says how to get them
    assert code == 0 and "num_updates 5" in out
    assert "AutoAssist pair checks off" in out and "autoassist-features" in out


def test_a_file_built_with_no_checks_has_none_for_a_run_that_requires_them(tiny_data, tmp_path):
    """``--pair-checks none`` writes a pair-checks array with nothing in it: under
    ``--assistant-pair-checks require`` that must stop the run as a file without the array
    does, not train with 0 pairs flagged."""
    from autoassist_fairseq.features.build import build_features
    from autoassist_fairseq.checks.settings import PairCheckSettings
    from autoassist_fairseq.features.store import FeatureStore
    from autoassist_fairseq.features.training import _suspect_pairs

    prefix = build_features(str(tiny_data), "src", "tgt", output=str(tmp_path / "none"),
                            settings=PairCheckSettings(checks=()))
    store = FeatureStore.open(prefix, rebuild_hint="REBUILD")
    with pytest.raises(FileNotFoundError, match="--pair-checks none.*REBUILD"):
        _suspect_pairs(store, "require", "paper")
    assert _suspect_pairs(store, "auto", "paper") is None  # auto: off, with a warning
    built = FeatureStore.open(str(tiny_data / "train.src-tgt.autoassist"))
    assert _suspect_pairs(built, "require", "paper") is not None


def test_the_registry_declares_every_column_once_and_scores_read_each_checks_own():
    """Each column of the pair-checks array belongs to exactly one check of the registry, and
    a check's flags move only with its own columns."""
    from autoassist_fairseq.checks.settings import CHECKS, COLUMNS, REGISTRY

    owned = [c for check in REGISTRY for c in check.columns]
    assert sorted(owned) == sorted(COLUMNS) and len(owned) == len(set(owned))
    assert CHECKS == tuple(check.name for check in REGISTRY)
    settings = PairCheckSettings(checks=CHECKS)
    for check in REGISTRY:
        quiet = np.full((1, len(COLUMNS)), np.nan)
        before = {name for name, (_, f) in check_scores(quiet, settings)[0].items() if f.any()}
        loud = quiet.copy()
        # a value past every bar in each of this check's columns, and nothing elsewhere
        loud[0, list(check.at)] = {"language": [1.0, 1.0, -9.0], "unrelated": [0.99],
                                   "digits": [9.0, 9.0, 0.0], "lexical": [-9.0, -9.0],
                                   "script": [1.0], "langid": [99.0]}[check.name]
        after = {name for name, (_, f) in check_scores(loud, settings)[0].items() if f.any()}
        assert after - before == {check.name}
