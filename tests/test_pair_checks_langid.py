"""The langid check (checks/langid.py): a side in a language other than its own."""
import logging

import numpy as np
import pytest
import scipy.sparse as sp

from autoassist_fairseq.checks import langid as langid_check
from autoassist_fairseq.checks.langid import (LANGID_BAR, feature_counts, identifier,
                                                      identifier_code, langid_scores,
                                                      naive_bayes_scores)
from autoassist_fairseq.checks.words import decode_pieces
from autoassist_fairseq.checks.columns import (COLUMNS, DEFAULT_CHECKS, PairCheckSettings,
                                                     flag_counts, flagged, pair_check_columns,
                                                     settings_from_args)
from autoassist_fairseq.features.store import FeatureStore
from autoassist_fairseq.features.tfidf import tfidf_features
from utils import run, unshared_words


def raw_scores(texts):
    """Per text, py3langid's raw naive Bayes score of every language (its ``_raw_score``),
    through the check's batched counting and scoring."""
    encode = identifier()._encode  # the identifier's own normalisation of a text
    return naive_bayes_scores(feature_counts([encode(text) for text in texts]))

EN = ["The children are playing in the garden behind the old house.",
      "We will meet at the train station tomorrow morning.",
      "Please send me the report before the end of the week.",
      "Hostel Condado de Miranda",
      "My brother works as a teacher in a small village."]
DE = ["Die Kinder spielen im Garten hinter dem alten Haus.",
      "Wir treffen uns morgen früh am Bahnhof.",
      "Bitte schicken Sie mir den Bericht vor Ende der Woche.",
      "Gästehaus Condado de Miranda",
      "Mein Bruder arbeitet als Lehrer in einem kleinen Dorf."]
ES = "Los niños están jugando en el jardín detrás de la casa vieja."  # on the English side
FR = "Nous nous retrouverons demain matin à la gare avec nos amis."  # on the German side


def _mix():
    src, tgt = EN + [ES, EN[1]], DE + [DE[0], FR]
    return src, tgt


def test_a_side_in_a_third_language_is_flagged_its_translation_not():
    src, tgt = _mix()
    score = langid_scores(src, tgt, "en", "de")
    # clean pairs (a hostel's shared name included) below the bar; Spanish, French above
    assert (score[:5] < LANGID_BAR).all() and (score[5:] > LANGID_BAR).all()
    # the same through pair_check_columns, with fairseq-style codes; a default check where
    # py3langid is installed (as here)
    assert "langid" in DEFAULT_CHECKS
    settings = PairCheckSettings(checks=("langid",))
    zeros = sp.csr_matrix((len(src), 8), dtype=np.float32)
    checks = pair_check_columns(zeros, zeros, settings=settings, texts=(src, tgt),
                                langs=("en_XX", "deu"))
    np.testing.assert_allclose(checks[:, COLUMNS.index("other_language_margin")], score)
    np.testing.assert_array_equal(np.where(flagged(checks, settings))[0], [5, 6])
    assert flag_counts(checks, settings)["langid"] == 2
    # not asked for, or without the sentences: the column stays NaN and flags nothing
    without = PairCheckSettings(checks=tuple(c for c in DEFAULT_CHECKS if c != "langid"))
    for kwargs in ({}, {"settings": settings, "langs": ("en", "de")},
                   {"settings": without, "texts": (src, tgt), "langs": ("en", "de")}):
        assert np.isnan(pair_check_columns(zeros, zeros, **kwargs)[:, -1]).all()


@pytest.mark.parametrize("cells", [1 << 22, 64])  # one walk, and many walks of a few texts
def test_raw_scores_are_the_identifiers_own(cells, monkeypatch):
    """The texts walked through the automaton together score as py3langid scores each alone:
    texts of every length, upper case (which it lowers), other scripts, empty and
    featureless texts, and a text longer than a walk's cells."""
    monkeypatch.setattr(langid_check, "_CELLS", cells)
    texts = (EN + DE + [ES, FR, "", "   ", "THE CHILDREN ARE PLAYING", "Дети играют в саду.",
                        "子供たちは庭で遊んでいます。", "ab", " ".join(EN + DE) * 3])
    got = raw_scores(texts)
    ident = identifier()
    for text, row in zip(texts, got):
        # pylint: disable=protected-access
        want = ident._raw_score(ident._encode(text))
        if want.max() <= np.finfo(np.float32).min:  # no feature: the identifier's floor
            assert np.isnan(row).all(), text
        else:
            np.testing.assert_allclose(row, want, rtol=1e-5, atol=0.02, err_msg=text)
    assert np.isnan(got[texts.index("")]).all()


def test_an_unknown_language_is_skipped_with_a_log_line(caplog):
    src, tgt = _mix()
    assert identifier_code("xx") is None and identifier_code("zxx") is None
    assert identifier_code("en_XX") == "en" and identifier_code("de-DE") == "de"
    with caplog.at_level(logging.INFO, logger="autoassist_fairseq.features"):
        both_unknown = langid_scores(src, tgt, "src", "tgt")
        only_target = langid_scores(src, tgt, "xx", "de")
    assert np.isnan(both_unknown).all()
    assert "the identifier knows no language 'src'" in caplog.text and "'xx'" in caplog.text
    # the known side still runs: the French target is flagged, the Spanish source not judged
    assert only_target[6] > LANGID_BAR and not only_target[5] > LANGID_BAR
    settings = PairCheckSettings(checks=("langid",))
    zeros = sp.csr_matrix((len(src), 8), dtype=np.float32)
    checks = pair_check_columns(zeros, zeros, settings=settings, texts=(src, tgt), langs=("a", "b"))
    assert not flagged(checks, settings).any()


def test_shared_words_and_pieces():
    assert unshared_words("Hostel Condado de Miranda 2019", "Gästehaus Condado, de Miranda") == \
        "Hostel"
    assert decode_pieces(["\u2581Das", "\u2581Ha", "us", "."]) == "Das Haus."
    assert decode_pieces(["Das", "Ha@@", "us", "."]) == "Das Haus ."


def test_langid_settings_are_options_recorded_in_the_header(tmp_path):
    from autoassist_fairseq.features import build
    from autoassist_fairseq.tools import check_report
    for parser in (build.get_parser(), check_report.get_parser()):
        assert "--langid-bar" in parser.format_help()
    args = build.get_parser().parse_args(["data", "-s", "en", "-t", "de", "--langid-bar", "3",
                                          "--pair-checks", "language,langid"])
    settings = settings_from_args(args)
    assert settings.langid_bar == 3.0 and settings.checks == ("language", "langid")
    src, tgt = _mix()
    zeros = sp.csr_matrix((len(src), 8), dtype=np.float32)
    checks = pair_check_columns(zeros, zeros, settings=PairCheckSettings(checks=("langid",)),
                                texts=(src, tgt), langs=("en", "de"))
    prefix, ones = str(tmp_path / "f"), sp.csr_matrix(np.ones((len(src), 8), np.float32))
    FeatureStore.save(prefix, tfidf_features(ones, ones), {}, pair_check_columns=checks,
                      pair_check_settings=settings)
    store = FeatureStore.open(prefix)
    header = store.meta["pair_checks"]
    assert header["settings"]["langid_bar"] == 3.0
    assert header["langid"] == int((checks[:, 10] > 3.0).sum()) >= 2  # at the recorded bar
    assert header["columns"][-1] == "other_language_margin"
    np.testing.assert_array_equal(store.suspect_pairs(), flagged(checks, settings))
    # a file of the previous autoassist-features (10 columns): read without the langid check
    np.save(prefix + ".pair-checks.npy", checks[:, :10].copy())
    assert np.isnan(store.pair_check_columns()[:, 10]).all() and not store.suspect_pairs().any()


def test_features_command_decodes_the_binarised_text(tmp_path):
    raw, data = tmp_path / "raw", tmp_path / "data-bin"
    raw.mkdir()
    src, tgt = _mix()
    src, tgt = src[:5] * 8 + src[5:], tgt[:5] * 8 + tgt[5:]  # 40 clean pairs, then the two
    for split in ("train", "valid"):
        (raw / f"{split}.en").write_text("\n".join(src) + "\n")
        (raw / f"{split}.de").write_text("\n".join(tgt) + "\n")
    run(["fairseq-preprocess", "--source-lang", "en", "--target-lang", "de",
         "--trainpref", raw / "train", "--validpref", raw / "valid", "--destdir", data,
         "--joined-dictionary", "--workers", "1"])
    out = run(["autoassist-features", data, "-s", "en", "-t", "de", "--pair-checks", "langid"])
    assert "2 with a side in another language by py3langid" in out.stdout + out.stderr
    store = FeatureStore.open(str(data / "train.en-de.autoassist"))
    np.testing.assert_array_equal(np.where(store.suspect_pairs())[0], [40, 41])


def test_union_at_each_langid_bar_from_a_prepared_corpus(tmp_path):
    """research.langid_bar --features: the union of the recorded checks with the langid bar
    moved, from the stored margins (no rebuild)."""
    from research.langid_bar import union_table
    src, tgt = _mix()
    ones = sp.csr_matrix(np.ones((len(src), 8), np.float32))
    for checks_run in (("langid",), ("language",)):
        settings = PairCheckSettings(checks=checks_run)
        checks = pair_check_columns(ones, ones, settings=settings, texts=(src, tgt),
                                    langs=("en", "de"))
        prefix = str(tmp_path / checks_run[0])
        FeatureStore.save(prefix, tfidf_features(ones, ones), {}, pair_check_columns=checks,
                          pair_check_settings=settings)
    margins = FeatureStore.open(str(tmp_path / "langid")).pair_check_columns()[:, 10]
    bars = (float(np.sort(margins)[-2]) - 0.5, float(margins.max()) - 0.5, 1e6)
    table = union_table(str(tmp_path / "langid"), bars)
    assert table["union_flagged_pairs"] == {str(bars[0]): 2, str(bars[1]): 1, str(bars[2]): 0}
    assert table["pairs"] == len(src)
    with pytest.raises(SystemExit, match="without the langid check"):
        union_table(str(tmp_path / "language"), bars)
