"""autoassist-check-report: labelled pairs mixed into a clean corpus, checked and scored."""

import gzip
import json
import numpy as np
import pytest

from autoassist_fairseq.tools import bootstrap, check_figures, check_report, labelled_pairs

LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _vocab(rng, n, length=(3, 8)):
    return ["".join(rng.choice(list(LETTERS), size=rng.integers(*length))) for _ in range(n)]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A toy language pair (each "en" word has its "de" word), a clean corpus of 900 pairs,
    and 300 labelled pairs: V translations, A misaligned (another pair's target, the same
    price list with other prices), L a side in a third language, with a Bicleaner-like score
    that ranks them imperfectly."""
    rng = np.random.default_rng(0)
    en, de, third = _vocab(rng, 120), _vocab(rng, 120), _vocab(rng, 60)

    def pair():
        words = rng.integers(0, 120, size=rng.integers(4, 12))
        return " ".join(en[w] for w in words), " ".join(de[w] for w in words)

    path = tmp_path_factory.mktemp("report")
    third = [w + "ñ" for w in third]  # a letter the corpus's two languages lack
    clean = [pair() for _ in range(900)]
    for lang, side in (("en", 0), ("de", 1)):
        (path / f"clean.{lang}").write_text("\n".join(p[side] for p in clean) + "\n")
    rows = []
    for i in range(300):
        s, t = pair()
        label = "V" if i < 150 else "A" if i < 250 else "L"
        if label == "A":
            t = pair()[1] if i % 2 else t + f" {rng.integers(10, 99)}.{rng.integers(10, 99)}"
            s = s if i % 2 else s + f" {rng.integers(10, 99)}.{rng.integers(10, 99)}"
        elif label == "L":  # the target in English, or in a third language
            t = pair()[0] if i % 2 else " ".join(rng.choice(third, size=rng.integers(4, 12)))
        score = rng.uniform(0.5, 0.8) + (0.05 if label == "V" else 0.0)
        rows.append(f"v3\t{s}\t{t}\t{label}\t\t{score:.4f}")
    labelled = path / "labelled.tsv.gz"
    with gzip.open(labelled, "wt", encoding="utf-8") as f:
        f.write("release\ten\tde\tlabel\tlabel_second_evaluation\tbicleaner\n")
        f.write("\n".join(rows) + "\n")
    return path, labelled


def test_report_scores_each_check_on_the_labelled_pairs(corpus, tmp_path):
    path, labelled = corpus
    out = tmp_path / "report.json"
    # 200 resamples for the intervals, not the default 1000: each costs the figures of a whole
    # report (most of this test's time), and 200 show the same properties
    assert check_report.get_parser().parse_args(
        [str(labelled), "--clean", "c", "--src", "en", "--tgt", "de", "--out", "o"]
    ).bootstrap == 1000
    code = check_report.cli_main([str(labelled), "--clean", str(path / "clean"), "--src", "en",
                                  "--tgt", "de", "--out", str(out), "--share", "0.25",
                                  "--bpe-size", "300", "--workdir", str(tmp_path),
                                  "--pair-checks", "language,unrelated,digits,lexical",
                                  "--bootstrap", "200"])
    assert code == 0
    report = json.loads(out.read_text())
    assert report["share"] == 0.25 and report["clean_corpus"] == [str(path / "clean")]
    assert report["pairs"] == {"labelled": 300, "clean": 900}
    for label, n in (("V", 150), ("A", 100), ("L", 50), ("clean", 900)):
        counts = report["counts"][label]
        assert counts["pairs"] == n == counts["reached_checks"] + counts["dropped_by_cleaning"]
    rate = report["flag_rate"]
    assert set(rate) == {"cleaning", "language", "unrelated", "digits", "lexical", "union"}
    # the lexical check: another pair's target and a third language have no translations
    assert rate["lexical"]["V"] < 0.02 and rate["lexical"]["clean"] < 0.02
    assert rate["lexical"]["A"] > 0.1 and rate["lexical"]["L"] > 0.3
    # a side in a third language and other prices are found, translations left alone
    assert rate["language"]["L"] > 0.4 and rate["digits"]["A"] > 0.3
    assert rate["union"]["V"] < 0.1 and rate["union"]["clean"] < 0.05
    assert rate["union"]["A"] > 0.6 and rate["union"]["L"] > 0.6
    for label in ("V", "A", "L"):  # the union: each check, and the pairs cleaning dropped
        assert rate["union"][label] >= max(rate[c][label] for c in rate if c != "union") - 1e-9
    assert 0.8 < report["precision"] <= 1.0 and 0.6 < report["recall"] <= 1.0
    auc = report["auc"]
    assert auc["union"] > 0.8 and 0.5 < auc["bicleaner"] < auc["union"] and auc["lexical"] > 0.6
    found = report["noise_found_at_valid_share"]
    assert set(found) == {"union", "union_max_margin", "bicleaner"}
    for name, at in found.items():  # a looser bar finds at least as much noise
        assert 0 <= at["0.05"] <= at["0.1"] <= 1, name
    assert found["union"]["0.1"] > found["bicleaner"]["0.1"]
    halves = report["auc_halves"]  # each half alone: near the whole file's figure
    for key in ("even_rows", "odd_rows"):
        assert abs(halves[key]["union"] - auc["union"]) < 0.1 and halves[key]["bicleaner"] < 1
    assert halves["even_rows"]["union"] != halves["odd_rows"]["union"]
    assert report["pair_checks"]["checks"] == ["language", "unrelated", "digits", "lexical"]
    # how far each goal's figure would move on another sample of 300 labelled pairs
    intervals = report["intervals"]
    point = {"union A+L": rate["union"]["A+L"], "union V+F": rate["union"]["V+F"],
             "union L": rate["union"]["L"], "precision": report["precision"],
             "recall": report["recall"], "auc union": auc["union"],
             "auc bicleaner": auc["bicleaner"],
             "auc union - bicleaner": auc["union"] - auc["bicleaner"],
             "union A+L found at V+F 5%": found["union"]["0.05"],
             "bicleaner A+L found at V+F 5%": found["bicleaner"]["0.05"],
             "union - bicleaner A+L found at V+F 5%":
                 found["union"]["0.05"] - found["bicleaner"]["0.05"]}
    if "opusfilter" in report:  # OpusFilter's heuristics, on the same resamples
        heur = report["opusfilter"]
        point.update({
            "opusfilter union A+L": heur["flag_rate"]["union"]["A+L"],
            "opusfilter union V+F": heur["flag_rate"]["union"]["V+F"],
            "auc opusfilter union": heur["auc"]["union"],
            "auc union - opusfilter union": auc["union"] - heur["auc"]["union"],
            "opusfilter union A+L found at V+F 5%":
                heur["noise_found_at_valid_share"]["union"]["0.05"],
            "union - opusfilter union A+L found at V+F 5%":
                found["union"]["0.05"] - heur["noise_found_at_valid_share"]["union"]["0.05"]})
    assert set(intervals) == set(point)
    for name, iv in intervals.items():
        assert iv["replicates"] == 200 and iv["low"] <= point[name] <= iv["high"], name
        assert iv["two_samples_95"] == pytest.approx(1.96 * 2 ** 0.5 * iv["sd"]), name
    # 50 L pairs vary more than the 250 pairs of A+L
    assert intervals["union L"]["sd"] > intervals["union A+L"]["sd"] > 0

    # the checks' settings are options: without the digits check it neither runs nor flags
    check_report.cli_main([str(labelled), "--clean", str(path / "clean"), "--src", "en",
                           "--tgt", "de", "--out", str(out), "--share", "0.25",
                           "--bpe-size", "300", "--workdir", str(tmp_path),
                           "--pair-checks", "language,unrelated",
                           "--pairs-out", str(tmp_path / "pairs.tsv.gz"), "--bootstrap", "0"])
    fewer = json.loads(out.read_text())
    assert "digits" not in fewer["flag_rate"] and "intervals" not in fewer
    assert fewer["flag_rate"]["union"]["A"] < rate["union"]["A"]
    # --pairs-out: every labelled pair in the file's order, with what flagged it
    with gzip.open(labelled, "rt", encoding="utf-8") as f:
        given = [line.rstrip("\n").split("\t") for line in f][1:]
    with gzip.open(tmp_path / "pairs.tsv.gz", "rt", encoding="utf-8") as f:
        header, *pairs = [line.rstrip("\n").split("\t") for line in f]
    assert header == ["row", "label", "dropped", "language_flag", "unrelated_flag",
                      "language_score", "unrelated_score", "union_flag", "union_score",
                      "bicleaner", "en", "de"]
    assert [p[0] for p in pairs] == [str(i) for i in range(300)]
    assert [(p[1], p[-2], p[-1], float(p[9])) for p in pairs] == \
        [(g[3], g[1], g[2], pytest.approx(float(g[5]), abs=1e-4)) for g in given]
    for label in ("V", "A", "L"):
        mine = [p for p in pairs if p[1] == label]
        assert np.mean([p[7] == "1" for p in mine]) == pytest.approx(
            fewer["flag_rate"]["union"][label])
        assert all(p[3] == "" for p in mine if p[2] == "1")  # dropped: no check reached
        assert np.mean([p[3] == "1" for p in mine if p[2] == "0"]) == pytest.approx(
            fewer["flag_rate"]["language"][label])


def test_report_refuses_bad_input_with_the_fix(corpus, tmp_path, caplog):
    path, labelled = corpus
    args = [str(labelled), "--clean", str(path / "clean"), "--src", "en", "--tgt", "fr",
            "--out", str(tmp_path / "r.json"), "--workdir", str(tmp_path)]
    assert check_report.cli_main(args) == 1
    assert f"{labelled} has no column fr (columns: " in caplog.text
    assert "it needs one column per language named as --src/--tgt, and 'label': give " \
        "--src/--tgt the names of its language columns" in caplog.text
    assert not (tmp_path / "r.json").exists()
    args[6] = "de"
    assert check_report.cli_main(args[:2] + [str(path / "nothing")] + args[3:]) == 1
    assert f"clean corpus side not found: {path / 'nothing'}.en (nor .gz); give --clean the " \
        "path prefix of the clean corpus's two sides" in caplog.text
    for given, what in ((tmp_path / "none.tsv", "not found"), (tmp_path, "is a folder, not a file")):
        assert check_report.cli_main([str(given)] + args[1:]) == 1
        assert f"labelled pairs {what}: {given}; give the labelled TSV file (a header line " \
               "naming the columns en, de and 'label'" in caplog.text, caplog.text
    with pytest.raises(ValueError, match="needs 2700 clean pairs.*900"):
        labelled_pairs.mix(labelled_pairs.read_labelled(str(labelled), "en", "de"),
                           ["a"] * 900, ["b"] * 900, 0.1, 0)
    assert check_report.cli_main(args[:-4] + ["--tgt", "de", "--out", "x", "--share", "1.5"]) == 2
    assert "--share must be between 0 and 1 (got 1.5): give the share of labelled pairs" \
        in caplog.text
    assert check_report.cli_main(args[:-4] + ["--tgt", "de", "--out", "x", "--bootstrap", "1"]) == 2
    assert "--bootstrap needs 0 (no intervals) or at least 2 resamples" in caplog.text


def test_bootstrap_gives_the_sampling_spread_of_a_figure():
    """The share of ones among 400 rows, 200 of them ones: its standard error is
    sqrt(0.25 / 400) = 0.025; a figure no resample can compute is left out."""
    rows = np.repeat([0.0, 1.0], 200)
    out = bootstrap.bootstrap(lambda index: {"share": rows[index].mean(), "never": float("nan")},
                              len(rows), replicates=2000, seed=1)
    assert set(out) == {"share"}
    share = out["share"]
    assert share["sd"] == pytest.approx(0.025, rel=0.1)
    assert share["low"] == pytest.approx(0.5 - 1.96 * 0.025, abs=0.01)
    assert share["high"] == pytest.approx(0.5 + 1.96 * 0.025, abs=0.01)
    assert share["two_samples_95"] == pytest.approx(1.96 * 2 ** 0.5 * 0.025, rel=0.1)
    with pytest.raises(ValueError, match="at least 2 replicates"):
        bootstrap.bootstrap(lambda index: {}, 10, replicates=1)


def test_union_score_ranks_flagged_pairs_first_then_adds_the_checks_evidence():
    """Pairs a check flags come first, by their largest margin; the others by the sum of the
    checks' standardised scores, so two moderate signals outrank one signal alone (which
    the largest margin would rank the other way)."""
    from autoassist_fairseq.checks.columns import union_score

    # pairs 0-3 unflagged; 4 and 5 flagged by the first check (margins 0.5 and 2)
    first = np.array([0.0, 0.6, 0.9, 0.0, 2.0, 3.0])
    second = np.array([0.0, 0.6, 0.0, np.nan, 0.0, 0.0])  # NaN: no evidence, typical
    per_check = {"a": (first, first > 1.5), "b": (second, second > 1.5)}
    margin = np.array([-1.5, -0.9, -0.6, -1.5, 0.5, 2.0])  # pair 2 has the largest unflagged
    score = union_score(per_check, margin)
    assert list(np.argsort(-score, kind="stable")) == [5, 4, 1, 2, 0, 3]
    assert score[0] == score[3]  # no evidence on either check: the same rank
    assert np.all(np.isfinite(score))
    # one check that ran on no pair adds nothing
    per_check["c"] = (np.full(6, np.nan), np.zeros(6, dtype=bool))
    assert np.allclose(union_score(per_check, margin), score)


def test_labels_outside_the_known_set_are_refused(corpus, tmp_path, caplog):
    """A label the report does not know (a typo, lower case) would count in no group: every
    figure NaN and exit 0. Refused, with the unknown labels and the known ones."""
    path, labelled = corpus
    with gzip.open(labelled, "rt", encoding="utf-8") as f:
        lines = f.read().splitlines()
    lines[1] = lines[1].replace("\tV\t", "\tX\t")
    lines[2] = lines[2].replace("\tV\t", "\tv\t")
    odd = tmp_path / "odd.tsv"
    odd.write_text("\n".join(lines) + "\n")
    out = tmp_path / "r.json"
    assert check_report.cli_main([str(odd), "--clean", str(path / "clean"), "--src", "en",
                                  "--tgt", "de", "--out", str(out), "--share", "0.25",
                                  "--bpe-size", "300", "--workdir", str(tmp_path),
                                  "--bootstrap", "0"]) == 1
    assert "2 pairs with labels outside the known set: 'X', 'v'" in caplog.text
    assert "the labels are V, F, A, L, T, MT, E" in caplog.text and not out.exists()


@pytest.mark.parametrize("flags, code, message", [
    (["--bpe-size", "0"], 2, "--bpe-size must be at least 1"),
    (["--unrelated-p-value", "-1"], 2, "--unrelated-p-value -1.0 is out of range"),
    (["--pair-checks", "language,typo"], 2, "unknown pair check typo"),
    # sentencepiece cannot fit the mix's characters into 5 pieces
    (["--bpe-size", "5"], 1, "give a larger --bpe-size"),
])
def test_bad_preparation_and_check_settings_are_refused(corpus, tmp_path, caplog, flags, code,
                                                        message):
    path, labelled = corpus
    out = tmp_path / "r.json"
    assert check_report.cli_main([str(labelled), "--clean", str(path / "clean"), "--src", "en",
                                  "--tgt", "de", "--out", str(out), "--share", "0.25",
                                  "--workdir", str(tmp_path), "--bootstrap", "0",
                                  *flags]) == code
    assert message in caplog.text and not out.exists()


def test_check_pairs_breaks_the_flags_down_by_label(tmp_path):
    """research.check_pairs: per label, the combinations of checks that flagged each pair,
    the pairs sharing half their words, and the words of the side langid judged."""
    from research import check_pairs

    header = ["row", "label", "dropped", "langid_flag", "language_flag", "langid_score",
              "language_score", "union_flag", "union_score", "bicleaner", "en", "de"]
    rows = [["0", "V", "0", "1", "0", "8", "0", "1", "1", "0.5", "Hotels in Zürich (Switzerland)",
             "Hotels in Zürich (Schweiz)"],
            ["1", "L", "0", "1", "1", "20", "3", "1", "2", "0.1",
             "Los niños están jugando en el jardín", "Die Kinder spielen im Garten"],
            ["2", "V", "0", "0", "0", "-9", "-3", "0", "-1", "0.9", "The old house",
             "Das alte Haus"],
            ["3", "V", "1", "", "", "", "", "1", "", "0.2", "a", "b c d e f g"]]
    path = tmp_path / "pairs.tsv"
    path.write_text("\n".join("\t".join(r) for r in [header, *rows]) + "\n")
    got = check_pairs.breakdown(*check_pairs.read_pairs(str(path)), "en", "de")
    assert got["V"]["pairs"] == 3 and got["V"]["dropped"] == 1
    assert got["V"]["flagged_by"] == {"langid": 1, "none": 1}
    assert got["L"]["flagged_by"] == {"langid+language": 1}
    assert got["V"]["half_words_shared"] == {"reached": 1, "flagged_langid": 1,
                                             "flagged_language": 0}
    # the V pair is judged on "(Switzerland)" alone, the Spanish side on all its words
    assert got["V"]["langid_flagged_side_words"] == {"1": 1}
    assert got["L"]["langid_flagged_side_words"] == {"5+": 1}


def test_a_kind_column_gets_flag_rates_per_kind(corpus, tmp_path):
    """research/add_noise.py --labelled-out names each pair's noise kind: the same figures
    per kind, over the labelled pairs alone, next to the per-label ones."""
    path, labelled = corpus
    with gzip.open(labelled, "rt", encoding="utf-8") as f:
        header, *rows = [line.rstrip("\n").split("\t") for line in f]
    kind_of = {"V": lambda i: "clean", "A": lambda i: "other" if i % 2 else "prices",
               "L": lambda i: "english" if i % 2 else "third"}
    with_kind = tmp_path / "with-kind.tsv"
    with_kind.write_text("\t".join(header + ["kind"]) + "\n" + "".join(
        "\t".join(r + [kind_of[r[3]](i)]) + "\n" for i, r in enumerate(rows)))
    out = tmp_path / "report.json"
    code = check_report.cli_main([str(with_kind), "--clean", str(path / "clean"), "--src", "en",
                                  "--tgt", "de", "--out", str(out), "--share", "0.25",
                                  "--bpe-size", "300", "--workdir", str(tmp_path),
                                  "--pair-checks", "language,unrelated,digits",
                                  "--bootstrap", "0"])
    assert code == 0
    report = json.loads(out.read_text())
    by_kind, counts = report["flag_rate_by_kind"], report["counts_by_kind"]
    assert set(by_kind) == set(report["flag_rate"])
    kinds = {"clean", "other", "prices", "english", "third"}
    assert set(counts) == kinds and sum(c["pairs"] for c in counts.values()) == 300
    for check, rates in by_kind.items():
        assert set(rates) == kinds  # no groups, no pairs of the clean corpus
        reach = "reached_checks" if check not in ("cleaning", "union") else "pairs"
        for label, parts in (("V", ["clean"]), ("A", ["other", "prices"]),
                             ("L", ["english", "third"])):
            n = sum(counts[k][reach] for k in parts)
            assert sum(rates[k] * counts[k][reach] for k in parts) / n == pytest.approx(
                report["flag_rate"][check][label]), (check, label)
    # an English target: the language check finds it; another pair's target: left alone
    assert by_kind["language"]["english"] > 0.5 > by_kind["language"]["other"], by_kind
    # without the column the report keeps its layout
    labels = np.array(["V", "A", "clean", "clean"])
    plain = check_figures.report(labels, np.zeros(4, dtype=bool), {"c": np.ones(4, dtype=bool)},
                                 {"c": np.ones(4)}, {"union": np.ones(4)}, None)
    assert "flag_rate_by_kind" not in plain and "counts_by_kind" not in plain


def test_report_sets_opusfilters_heuristics_beside_the_checks(corpus, tmp_path):
    pytest.importorskip("opusfilter", reason="opusfilter is not installed (pip install "
                                             "autoassist-fairseq[opusfilter])")
    path, labelled = corpus
    out = tmp_path / "report.json"
    argv = [str(labelled), "--clean", str(path / "clean"), "--src", "en", "--tgt", "de",
            "--out", str(out), "--share", "0.25", "--bpe-size", "300", "--workdir",
            str(tmp_path), "--pair-checks", "language,unrelated,digits", "--bootstrap", "0"]
    assert check_report.cli_main(argv) == 0
    block = json.loads(out.read_text())["opusfilter"]
    names = ["LengthFilter", "LengthRatioFilter", "LongWordFilter", "HtmlTagFilter",
             "AverageWordLengthFilter", "AlphabetRatioFilter", "CharacterScoreFilter",
             "LanguageIDFilter", "TerminalPunctuationFilter", "NonZeroNumeralsFilter",
             "LongestCommonSubstringFilter", "RepetitionFilter"]
    assert list(block["parameters"]) == names and set(block["flag_rate"]) == set(names) | {"union"}
    assert block["parameters"]["CharacterScoreFilter"]["scripts"] == ["Latin", "Latin"]
    rate = block["flag_rate"]
    for label in ("V", "A", "L", "clean", "A+L", "V+F"):  # the union: any filter
        assert rate["union"][label] >= max(rate[n][label] for n in names) - 1e-9
    # a third language's letter (ñ) is still Latin; every other pair's target is English
    assert rate["CharacterScoreFilter"]["L"] == 0
    assert 0 <= block["auc"]["union"] <= 1 and block["pairs_per_cpu_second"] > 0
    at = block["noise_found_at_valid_share"]["union"]
    assert 0 <= at["0.05"] <= at["0.5"] <= 1
    assert check_report.cli_main(argv + ["--no-opusfilter"]) == 0
    plain = json.loads(out.read_text())
    assert "opusfilter" not in plain
    assert set(plain["pairs_per_cpu_second"]) == {"pair_checks", "preparation and pair_checks"}

    # with a bootstrap: the heuristics' figures get intervals beside the checks'; each tool's
    # throughput, pairs a CPU second
    assert check_report.cli_main(argv[:-2] + ["--bootstrap", "50"]) == 0
    report = json.loads(out.read_text())
    intervals, heur = report["intervals"], report["opusfilter"]
    for name, point in (("auc opusfilter union", heur["auc"]["union"]),
                        ("opusfilter union A+L", heur["flag_rate"]["union"]["A+L"]),
                        ("opusfilter union V+F", heur["flag_rate"]["union"]["V+F"]),
                        ("opusfilter union A+L found at V+F 5%",
                         heur["noise_found_at_valid_share"]["union"]["0.05"]),
                        ("auc union - opusfilter union",
                         report["auc"]["union"] - heur["auc"]["union"])):
        assert intervals[name]["replicates"] == 50, name
        assert intervals[name]["low"] <= point + 1e-9 and point - 1e-9 <= intervals[name]["high"]
    assert {"union A+L found at V+F 5%", "bicleaner A+L found at V+F 5%"} <= set(intervals)
    speed = report["pairs_per_cpu_second"]
    assert speed["opusfilter heuristics"] == heur["pairs_per_cpu_second"]
    # pairs a CPU second: the pairs each part handled over the CPU seconds it took
    seconds, counts = report["cpu_seconds"], report["counts"]
    kept = sum(c["reached_checks"] for c in counts.values())
    pairs = sum(c["pairs"] for c in counts.values())
    assert speed["pair_checks"] == pytest.approx(kept / seconds["pair_checks"])
    assert speed["preparation and pair_checks"] == pytest.approx(
        pairs / (seconds["preparation"] + seconds["pair_checks"]))


def test_each_resample_scores_the_checks_and_the_heuristics_on_the_same_rows():
    """A tiny deterministic case: heuristics that rank the pairs as the checks' union does
    but reversed have, on every resample, AUC 1 - the union's; and with the same ranking as
    the union's, the same figures on every resample (a difference of 0). Resamples drawn
    apart for each tool would give neither."""
    labels = np.array(["V", "F", "V", "A", "L", "A", "V", "A", "clean", "clean"])
    union_score = np.array([0.1, 0.4, 0.7, 0.3, 0.9, 0.8, 0.2, 0.6, 0.0, 0.5])
    union = union_score > 0.5
    drawn = np.arange(8)  # the labelled rows; the clean pairs stay out
    bicleaner = -union_score

    def intervals(heuristic_score):
        return check_figures.report_intervals(
            labels, drawn, union, union_score, bicleaner,
            {"flag": heuristic_score > np.median(heuristic_score), "score": heuristic_score},
            200, 0)

    same = intervals(union_score)
    assert same["auc union - opusfilter union"]["sd"] == 0
    assert same["auc union - opusfilter union"]["low"] == 0 == \
        same["auc union - opusfilter union"]["high"]
    assert same["union - opusfilter union A+L found at V+F 5%"]["sd"] == 0
    for key in ("sd", "low", "high", "replicates"):
        assert same["auc opusfilter union"][key] == same["auc union"][key] == \
            same["auc bicleaner"][key]
        assert same["opusfilter union A+L found at V+F 5%"][key] == \
            same["union A+L found at V+F 5%"][key]
    reversed_ = intervals(-union_score)
    union_auc, heur_auc = reversed_["auc union"], reversed_["auc opusfilter union"]
    assert union_auc["sd"] > 0
    assert heur_auc["low"] == pytest.approx(1 - union_auc["high"])
    assert heur_auc["high"] == pytest.approx(1 - union_auc["low"])
    # union - heuristics = 2 x union - 1 on each resample: twice the spread
    assert reversed_["auc union - opusfilter union"]["sd"] == pytest.approx(2 * union_auc["sd"])
