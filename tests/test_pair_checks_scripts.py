"""The script check (checks/scripts.py): a side in an alphabet its language does not use."""
import argparse

import numpy as np

from autoassist_fairseq.checks.columns import (COLUMNS, DEFAULT_CHECKS, PairCheckSettings,
                                                     add_settings_arguments, flag_counts,
                                                     flagged, pair_check_columns,
                                                     settings_from_args)
from autoassist_fairseq.features.tfidf import count_matrix

W = "\u2581"
EN = [W + w for w in "the house is small a dog runs here we see".split()]
DE = [W + w for w in "das haus ist klein ein hund läuft hier wir sehen".split()]
RU = [W + w for w in "дом маленький собака бежит".split()]
HI = [W + w for w in "यह घर छोटा है".split()]
JA = ["家", "は", "小さい", "です", "犬", "が", "走る", "ここ"]
NAMES = [W + w for w in "Anna Berlin Toyota Москва 8Ω".split()]


def _counts(sentences, symbols):
    sid = {s: i for i, s in enumerate(symbols)}
    ids = [[sid[w] for w in s] for s in sentences]
    return count_matrix(np.concatenate(ids), np.cumsum([0] + [len(x) for x in ids]),
                        len(symbols))


def _corpus(rng, tgt_words, n=300):
    """*n* clean pairs (English against *tgt_words*, a name on both sides), then a target in
    Russian, one in Hindi, a Russian name copied onto both sides, a Greek unit letter on
    one side, and an English source whose target is left in English."""
    src, tgt = [], []
    for _ in range(n):
        k = rng.integers(3, 7)
        words = rng.choice(len(EN), k)
        name = NAMES[rng.integers(3)]
        src.append([EN[i] for i in words] + [name])
        tgt.append([tgt_words[i % len(tgt_words)] for i in words] + [name])
    src += [EN[:4], EN[2:6], EN[:3] + [NAMES[3]], EN[:3] + [NAMES[4]], EN[:5]]
    tgt += [RU, HI, tgt_words[:3] + [NAMES[3]], tgt_words[:3], EN[:5]]
    symbols = ["<s>", "<pad>", "</s>", "<unk>"] + EN + DE + RU + HI + JA + NAMES
    return _counts(src, symbols), _counts(tgt, symbols), symbols


def test_script_check_flags_a_side_in_another_alphabet_only():
    rng = np.random.default_rng(0)
    for tgt_words in (DE, JA):  # en-de, and en-ja: Latin names on the Japanese side are its own
        src, tgt, symbols = _corpus(rng, tgt_words)
        checks = pair_check_columns(src, tgt, symbols=symbols)
        assert checks.shape[1] == len(COLUMNS) and "script" in DEFAULT_CHECKS
        share = checks[:, COLUMNS.index("foreign_script_share")]
        np.testing.assert_array_equal(share[-5:-3], [1.0, 1.0])  # the Russian and Hindi sides
        only = PairCheckSettings(checks=("script",))
        flags = flagged(pair_check_columns(src, tgt, symbols=symbols, settings=only), only)
        # the third alphabets flag; clean pairs, a copied Russian name, a stray Greek letter
        # and the English copy (the language check's case) do not
        np.testing.assert_array_equal(np.where(flags)[0], [len(flags) - 5, len(flags) - 4])
        assert flag_counts(checks)["script"] == 2
        # no subword text: the check cannot run, and flags nothing
        script_column = COLUMNS.index("foreign_script_share")
        assert np.isnan(pair_check_columns(src, tgt)[:, script_column]).all()


def test_script_settings_are_options():
    parser = argparse.ArgumentParser()
    add_settings_arguments(parser)
    settings = settings_from_args(parser.parse_args(["--script-share", "0.8",
                                                     "--rare-script", "0.05"]))
    assert (settings.script_share, settings.rare_script) == (0.8, 0.05)
    assert PairCheckSettings.from_dict(settings.to_dict()) == settings
    rng = np.random.default_rng(1)
    src, tgt, symbols = _corpus(rng, DE, n=20)  # in 20 pairs the Russian lines are over 1% of the letters
    default = PairCheckSettings(checks=("script",))
    checks = pair_check_columns(src, tgt, symbols=symbols, settings=default)
    assert not flagged(checks, default).any()
    wide = PairCheckSettings(checks=("script",), rare_script=0.5)
    assert flagged(pair_check_columns(src, tgt, symbols=symbols, settings=wide), wide)[-5]


def test_a_file_of_the_previous_autoassist_features_reads_without_the_script_check(tmp_path):
    from autoassist_fairseq.features.store import FeatureStore
    from autoassist_fairseq.features.tfidf import tfidf_features
    src, tgt, symbols = _corpus(np.random.default_rng(2), DE)
    checks = pair_check_columns(src, tgt, symbols=symbols)
    prefix = str(tmp_path / "f")
    FeatureStore.save(prefix, tfidf_features(src, tgt), {}, pair_check_columns=checks)
    store = FeatureStore.open(prefix)
    assert store.meta["pair_checks"]["script"] == 2
    np.save(prefix + ".pair-checks.npy", checks[:, :9].copy())  # nine columns: no script
    assert np.isnan(store.pair_check_columns()[:, 9]).all()
    np.testing.assert_array_equal(store.suspect_pairs(), flagged(checks[:, :9]))
    assert not store.suspect_pairs()[-5:-3].any()  # the Russian and Hindi sides pass then
