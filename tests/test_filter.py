"""autoassist-filter: a prepared corpus without the pairs its pair checks flag (in-process)."""

import shutil

import numpy as np
import pytest

from autoassist_fairseq.tools.filter import cli_main
from autoassist_fairseq.features.store import FeatureStore


def _with_flags(tiny_data, tmp_path, rows):
    """A copy of tiny_data whose pair checks flag at least *rows* (unrelated sides)."""
    data = tmp_path / "data"
    shutil.copytree(tiny_data, data)
    path = data / "train.src-tgt.autoassist.pair-checks.npy"
    checks = np.load(path)
    checks[rows, 2] = 1.0  # a p-value of 1 is over any bar
    np.save(path, checks)
    return data, FeatureStore.open(str(data / "train.src-tgt.autoassist")).suspect_pairs()


def test_filter_keeps_the_unflagged_pairs_token_for_token(tiny_data, tmp_path, capsys):
    from fairseq.data import indexed_dataset

    data, suspect = _with_flags(tiny_data, tmp_path, [0, 3, 7])
    n = len(suspect)
    (data / "train.kept-lines").write_text("".join(f"{i + 2}\n" for i in range(n)))
    out = tmp_path / "filtered"
    assert cli_main([str(data), "--out", str(out)]) == 0
    keep = np.flatnonzero(~suspect)
    assert {0, 3, 7} <= set(np.flatnonzero(suspect).tolist()) and 0 < len(keep) < n
    for lang in ("src", "tgt"):
        whole = indexed_dataset.make_dataset(str(data / f"train.src-tgt.{lang}"), impl="mmap")
        kept = indexed_dataset.make_dataset(str(out / f"train.src-tgt.{lang}"), impl="mmap")
        assert len(kept) == len(keep)
        assert all(np.array_equal(kept[j], whole[i]) for j, i in enumerate(keep))
    assert np.loadtxt(out / "train.kept-lines", dtype=int).tolist() == (keep + 2).tolist()
    # the dictionaries and the valid split are DATA's; features cover the kept pairs
    assert (out / "dict.tgt.txt").resolve() == (data / "dict.tgt.txt").resolve()
    assert (out / "valid.src-tgt.src.idx").resolve() == (data / "valid.src-tgt.src.idx").resolve()
    assert FeatureStore.open(str(out / "train.src-tgt.autoassist")).num_rows == len(keep)
    assert f"kept {len(keep)} of {n} training pairs ({n - len(keep)} flagged" in capsys.readouterr().out
    # DATA is left as it was
    assert len(indexed_dataset.make_dataset(str(data / "train.src-tgt.src"), impl="mmap")) == n


def test_filter_without_kept_lines_or_features(tiny_data, tmp_path):
    data, suspect = _with_flags(tiny_data, tmp_path, [1])
    out = tmp_path / "filtered"
    (data / "train.kept-lines").write_text("".join(f"{i}\n" for i in range(len(suspect))))
    assert cli_main([str(data), "--out", str(out)]) == 0
    assert (out / "train.kept-lines").exists() and list(out.glob("*.autoassist.json"))
    # again into the same OUT, from a DATA without kept-lines, without features: nothing
    # of the first output that would describe other pairs is left
    (data / "train.kept-lines").unlink()
    assert cli_main([str(data), "--out", str(out), "--no-features"]) == 0
    assert not (out / "train.kept-lines").exists()
    assert not list(out.glob("*.autoassist.json"))
    assert (out / "train.src-tgt.src.bin").exists()


@pytest.mark.parametrize("case, message", [
    ("same", "--out must differ from DATA"),
    ("all", "flag every pair"),
    ("no-checks", "pair"),
    ("no-data", "no binarised training set"),
    ("kept-lines", "has 3 lines for"),
    ("two-pairs", "holds the training sets of 2 language pairs (aa-bb, src-tgt)"),
])
def test_filter_errors_name_the_problem(tiny_data, tmp_path, capsys, case, message):
    data, suspect = _with_flags(tiny_data, tmp_path, [1])
    out = tmp_path / "filtered"
    if case == "same":
        out = data
    elif case == "all":
        _, suspect = _with_flags(tiny_data, tmp_path / "all", list(range(len(suspect))))
        data = tmp_path / "all" / "data"
    elif case == "no-checks":
        (data / "train.src-tgt.autoassist.pair-checks.npy").unlink()
    elif case == "no-data":
        data = tmp_path
    elif case == "kept-lines":
        (data / "train.kept-lines").write_text("0\n1\n2\n")
    elif case == "two-pairs":  # a second pair's training set beside the first
        for side in ("aa", "bb"):
            for ext in ("bin", "idx"):
                shutil.copy(data / f"train.src-tgt.src.{ext}", data / f"train.aa-bb.{side}.{ext}")
    assert cli_main([str(data), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("autoassist-filter: error: ") and message in err, err
    assert not (tmp_path / "filtered").exists()  # nothing written


def test_drop_share_drops_the_flagged_pairs_then_the_most_noise_like(tiny_data, tmp_path, capsys):
    from autoassist_fairseq.features.prepared import flagged_pairs
    from fairseq.data import indexed_dataset

    data, suspect = _with_flags(tiny_data, tmp_path, [0, 3, 7])
    n, n_flagged = len(suspect), int(suspect.sum())
    share = (n_flagged + 20) / n
    out = tmp_path / "filtered"
    assert cli_main([str(data), "--out", str(out), "--drop-share", str(share),
                     "--no-features"]) == 0
    _, score, _ = flagged_pairs(data, "src", "tgt")
    kept = indexed_dataset.make_dataset(str(out / "train.src-tgt.src"), impl="mmap")
    assert len(kept) == n - n_flagged - 20
    assert "and 20 more of the highest noise scores" in capsys.readouterr().out
    # the flagged pairs rank above every other; the 20 next are the highest-scoring others
    assert score[suspect].min() > score[~suspect].max()
    whole = indexed_dataset.make_dataset(str(data / "train.src-tgt.src"), impl="mmap")
    kept_rows = {tuple(kept[j].tolist()) for j in range(len(kept))}
    threshold = np.sort(score[~suspect])[::-1][19]
    for i in np.flatnonzero(~suspect):
        assert (tuple(whole[int(i)].tolist()) in kept_rows) == (score[i] < threshold), i
    # a share below the flagged pairs' drops exactly those; a share of 1 or more is refused
    assert cli_main([str(data), "--out", str(tmp_path / "f2"), "--drop-share", "0.001",
                     "--no-features"]) == 0
    assert "more of the highest" not in capsys.readouterr().out
    assert cli_main([str(data), "--out", str(tmp_path / "f3"), "--drop-share", "1"]) == 1
    assert "--drop-share 1.0 is out of range" in capsys.readouterr().err


def test_filtered_features_are_built_at_the_settings_of_data(tiny_data, tmp_path):
    """OUT's pair checks run with the checks and bars DATA's features were built with, so
    that training on OUT flags by what the user chose, not by the defaults."""
    from autoassist_fairseq.features.build import build_features
    from autoassist_fairseq.checks.columns import PairCheckSettings

    data = shutil.copytree(tiny_data, tmp_path / "data")
    chosen = PairCheckSettings(checks=("language", "unrelated"), unrelated_p_value=0.05)
    build_features(str(data), "src", "tgt", settings=chosen)
    out = tmp_path / "filtered"
    assert cli_main([str(data), "--out", str(out)]) == 0
    built = FeatureStore.open(str(out / "train.src-tgt.autoassist")).pair_check_settings()
    assert built == chosen


def test_ranked_drop_refuses_a_share_that_ends_inside_a_wide_tie():
    """Where more unflagged pairs tie at the boundary's score than the share still takes,
    the pairs taken from the tie would be picked by their place in the corpus: refused when
    they are more than 1% of the pairs dropped beyond the flagged ones (and more than one),
    with the largest share the scores rank."""
    from autoassist_fairseq.tools.drop_share import ranked_drop

    flags = np.zeros(1000, dtype=bool)
    flags[:50] = True
    score = np.zeros(1000)
    score[:50] = 10.0
    score[50:150] = np.linspace(5, 1, 100)  # 100 ranked pairs, then 850 tied at 0
    # the boundary among the ranked pairs: exact, in the order of the scores
    dropped = ranked_drop(flags, score, 0.1)
    assert dropped.sum() == 100 and dropped[:100].all()
    with pytest.raises(ValueError, match=r"--drop-share 0.2 cannot be ranked: 850 of the 1000 "
                                         r"training pairs \(85%\) tie.*50 of them would be "
                                         r"dropped by their place.*--drop-share 0.15 or less"):
        ranked_drop(flags, score, 0.2, fix="; FIX")
    # one pair of a two-way tie (duplicates score alike) is let pass
    score[149] = score[148]
    assert ranked_drop(flags, score, 0.149).sum() == 149
    # all tied, nothing flagged: no share ranks
    with pytest.raises(ValueError, match="rank no pair beyond the 0 flagged ones.*FIX"):
        ranked_drop(np.zeros(600, dtype=bool), np.zeros(600), 0.2, fix="; FIX")
    assert not ranked_drop(np.zeros(600, dtype=bool), np.zeros(600), 0.0).any()


@pytest.mark.parametrize("checks, message", [
    (("digits",), "--drop-share 0.2 cannot be ranked"),  # no pair has digits: all tie
    ((), "built with --pair-checks none"),
])
def test_drop_share_without_ranking_checks_is_refused(tiny_data, tmp_path, capsys, checks,
                                                      message):
    """A feature file whose checks give every pair the same score cannot say which pairs
    are the most noise-like: --drop-share would drop the first rows of the corpus. A file
    without checks is refused even without --drop-share (there is nothing to filter by)."""
    from autoassist_fairseq.features.build import build_features
    from autoassist_fairseq.checks.columns import PairCheckSettings

    data = shutil.copytree(tiny_data, tmp_path / "data")
    build_features(str(data), "src", "tgt", settings=PairCheckSettings(checks=checks))
    out = tmp_path / "filtered"
    assert cli_main([str(data), "--out", str(out), "--drop-share", "0.2"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("autoassist-filter: error: ") and message in err, err
    assert "--pair-checks" in err and f"autoassist-features {data}" in err, err
    assert not out.exists()
    assert (cli_main([str(data), "--out", str(out)]) == 1) == (not checks)


@pytest.mark.parametrize("under", [False, True])
def test_out_that_is_a_file_is_refused(tiny_data, tmp_path, capsys, under):
    data, _ = _with_flags(tiny_data, tmp_path, [1])
    (tmp_path / "taken").write_text("a file\n")
    out = tmp_path / "taken" / "filtered" if under else tmp_path / "taken"
    assert cli_main([str(data), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("autoassist-filter: error: --out ") and "give a directory" in err, err
    assert (tmp_path / "taken").read_text() == "a file\n"
