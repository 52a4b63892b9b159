"""autoassist-features: the data formats it reads, the ranges of the pair checks' settings,
and what it logs about the checks that did not run (in-process)."""

import logging
import shutil

import numpy as np
import pytest

from autoassist_fairseq.features import build
from autoassist_fairseq.checks.columns import PairCheckSettings
from autoassist_fairseq.features.store import FeatureStore


@pytest.mark.parametrize("flag, value, message", [
    ("--unrelated-p-value", "-1", "-1.0 is out of range: give a value in (0, 1)"),  # all flagged
    ("--unrelated-p-value", "1", "1.0 is out of range: give a value in (0, 1)"),  # none
    ("--language-probability", "1.5", "1.5 is out of range: give a value in [0.5, 1)"),  # off
    ("--language-probability", "0.2", "0.2 is out of range: give a value in [0.5, 1)"),
    ("--digits-share", "2", "2.0 is out of range: give a value in [0, 1]"),
    ("--digits-min-different", "0", "0 is out of range: give a value of at least 1"),
    ("--digits-one-side", "0", "0 is out of range: give a value of at least 1"),
    ("--rare-script", "0", "0.0 is out of range: give a value in (0, 0.5]"),
    ("--script-share", "0", "0.0 is out of range: give a value in (0, 1]"),
    ("--langid-bar", "-1", "-1.0 is out of range: give a value of at least 0"),
    ("--lexical-bar", "nan", "nan is out of range: give a finite value"),
    ("--language-evidence", "inf", "inf is out of range: give a finite value"),
])
def test_settings_out_of_range_are_refused(tmp_path, caplog, flag, value, message):
    """Each bar outside the range of its meaning flags every pair or none: refused before
    any data is read, naming the option, its range and its default."""
    assert build.cli_main([str(tmp_path / "no-data"), "-s", "src", "-t", "tgt",
                           flag, value]) == 1
    assert f"{flag} {message} (default: " in caplog.text, caplog.text
    assert "data directory not found" not in caplog.text


def test_settings_in_range_and_a_header_out_of_range():
    edges = PairCheckSettings(flag_probability=0.5, unrelated_p_value=0.999, digits_share=0.0,
                              digits_min_different=1, digits_one_side=1, rare_script=0.5,
                              script_share=1.0, langid_bar=0.0, lexical_bar=-30.0,
                              language_evidence=2.0)
    assert PairCheckSettings.from_dict(edges.to_dict()) == edges
    with pytest.raises(ValueError, match="header records: --digits-share 2 is out of range.*"
                                         "rebuild the features"):
        PairCheckSettings.from_dict(dict(PairCheckSettings().to_dict(), digits_share=2))


def _rewrite_train(data, impl):
    """Train sides of *data* as ``fairseq-preprocess --dataset-impl IMPL`` writes them (its
    builder for lazy and cached; the text itself for raw)."""
    from fairseq.data import Dictionary, indexed_dataset

    for lang in ("src", "tgt"):
        prefix = str(data / f"train.src-tgt.{lang}")
        side = indexed_dataset.make_dataset(prefix, impl="mmap")
        rows = [side[i] for i in range(len(side))]
        del side
        for suffix in (".bin", ".idx"):
            (data / f"train.src-tgt.{lang}{suffix}").unlink()
        if impl == "raw":
            d = Dictionary.load(str(data / f"dict.{lang}.txt"))
            (data / f"train.src-tgt.{lang}").write_text(
                "".join(d.string(row) + "\n" for row in rows))
            continue
        builder = indexed_dataset.make_builder(indexed_dataset.data_file_path(prefix), impl)
        for row in rows:
            builder.add_item(row)
        builder.finalize(indexed_dataset.index_file_path(prefix))


@pytest.mark.parametrize("impl", ["lazy", "cached"])
def test_lazy_and_cached_data_give_the_features_of_mmap(tiny_data, tmp_path, impl):
    """--dataset-impl lazy and cached write one format (token ids + 1, TorchNet's); its
    features and the filtered corpus are those of the same text in the default mmap."""
    from fairseq.data import indexed_dataset

    from autoassist_fairseq.tools.filter import cli_main as filter_main

    data = shutil.copytree(tiny_data, tmp_path / "data")
    _rewrite_train(data, impl)
    assert indexed_dataset.infer_dataset_impl(str(data / "train.src-tgt.src")) == "cached"
    settings = PairCheckSettings(checks=("language", "unrelated", "digits"))
    prefix = build.build_features(str(data), "src", "tgt", settings=settings)
    mine = build.build_features(str(tiny_data), "src", "tgt", settings=settings,
                                output=str(tmp_path / "mmap" / "f"))
    a, b = FeatureStore.open(prefix), FeatureStore.open(mine)
    assert a.num_rows == b.num_rows == 600
    for name in ("indptr", "indices", "data"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    np.testing.assert_array_equal(a.pair_check_columns(), b.pair_check_columns())
    # autoassist-filter reads the sides pair by pair: the same ids as mmap's
    out = tmp_path / "filtered"
    assert filter_main([str(data), "--out", str(out), "--no-features"]) == 0
    kept = indexed_dataset.make_dataset(str(out / "train.src-tgt.tgt"), impl="mmap")
    whole = indexed_dataset.make_dataset(str(tiny_data / "train.src-tgt.tgt"), impl="mmap")
    keep = np.flatnonzero(~a.suspect_pairs())
    assert len(kept) == len(keep)
    assert all(np.array_equal(kept[j], whole[int(i)]) for j, i in enumerate(keep[:50]))


def test_raw_text_data_names_the_format_and_the_fix(tiny_data, tmp_path, caplog, capsys):
    from autoassist_fairseq.tools.filter import cli_main as filter_main

    data = shutil.copytree(tiny_data, tmp_path / "data")
    _rewrite_train(data, "raw")
    assert build.cli_main([str(data), "-s", "src", "-t", "tgt"]) == 1
    assert "train.src-tgt.src is raw text (fairseq-preprocess --dataset-impl raw)" in caplog.text
    assert "Dataset not found" not in caplog.text and "binarise it again" in caplog.text
    assert filter_main([str(data), "--out", str(tmp_path / "f")]) == 1
    assert "--dataset-impl raw; binarise it again" in capsys.readouterr().err


def test_the_language_check_is_reported_off_only_where_it_was_asked_for(tiny_data, tmp_path,
                                                                        caplog):
    """On a joined dictionary without the language check among --pair-checks, nothing is said
    of its dictionaries; with two dictionaries and the check asked for, the fix is."""
    caplog.set_level(logging.INFO, logger="autoassist_fairseq.features")
    data = shutil.copytree(tiny_data, tmp_path / "data")
    off = "the language check did not run"
    assert build.cli_main([str(data), "-s", "src", "-t", "tgt", "--pair-checks", "digits"]) == 0
    assert "pair checks (digits)" in caplog.text and off not in caplog.text
    caplog.clear()
    with open(data / "dict.tgt.txt", "a") as f:  # two dictionaries, the same ids
        f.write("zzz-only-in-tgt 1\n")
    assert build.cli_main([str(data), "-s", "src", "-t", "tgt", "--pair-checks",
                           "language,digits"]) == 0
    assert f"{off}: it needs one dictionary for both sides" in caplog.text
