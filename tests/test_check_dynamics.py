"""autoassist-check-report --dynamics-passes: the Boss's own losses beside the checks."""

import json
import subprocess
from types import SimpleNamespace

import numpy as np

import warm
from utils import LABEL_SMOOTHED, REPO, TINY_TRANSFORMER

from autoassist_fairseq.tools import check_dynamics, check_report
from test_check_report import corpus  # noqa: F401  (the labelled toy corpus)

PER_RUN = {"--user-dir", "--task", "--seed", "--log-format", "--log-interval", "--max-epoch",
           "--keep-last-epochs"}


def test_the_small_boss_is_the_configs():
    tokens = []
    for line in (REPO / "configs" / "multi30k" / "transformer_small.args").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            flag, _, value = line.partition(" ")
            if flag not in PER_RUN:
                tokens += [flag] + ([value] if value else [])
    assert tuple(tokens) == check_dynamics.SMALL_BOSS


def test_the_report_puts_the_dynamics_beside_the_checks(corpus, tmp_path, monkeypatch):  # noqa: F811
    path, labelled = corpus
    # the tiny Boss of the other tests: the plumbing, not the small Boss's learning, is tested
    # here (what the dynamics find: docs/results/noise)
    monkeypatch.setattr(check_dynamics, "SMALL_BOSS", tuple(
        ["--cpu"] + TINY_TRANSFORMER + list(LABEL_SMOOTHED) + [
            "--optimizer", "adam", "--lr", "0.005", "--lr-scheduler", "inverse_sqrt",
            "--warmup-updates", "4", "--max-tokens", "2000", "--num-workers", "0"]))

    def warm_call(cmd, stdout, stderr):
        """subprocess.call of the dynamics' `python -m fairseq_cli.preprocess` and `.train`,
        forked from the warm server (tests/warm.py) instead of ~6 s of imports each."""
        assert stderr == subprocess.STDOUT
        proc = warm.run(cmd)
        stdout.write(proc.stdout + proc.stderr)
        return proc.returncode

    monkeypatch.setattr(check_dynamics, "subprocess",
                        SimpleNamespace(call=warm_call, STDOUT=subprocess.STDOUT))
    out = tmp_path / "report.json"
    code = check_report.cli_main([str(labelled), "--clean", str(path / "clean"), "--src", "en",
                                  "--tgt", "de", "--out", str(out), "--share", "0.25",
                                  "--bpe-size", "300", "--workdir", str(tmp_path),
                                  "--bootstrap", "20", "--no-opusfilter", "--no-ratio-filter",
                                  "--pair-checks", "language,unrelated,digits",
                                  "--dynamics-passes", "2"])
    assert code == 0
    report = json.loads(out.read_text())
    assert report["dynamics_passes"] == 2
    auc, rate = report["auc"], report["flag_rate"]
    assert 0.0 <= auc["dynamics"] <= 1.0 and 0.0 <= auc["union_dynamics"] <= 1.0
    # the dynamics' bar is set from the corpus: a robust z of 3 flags a tail, not the bulk
    assert 0.0 <= rate["dynamics"]["clean"] < 0.2
    for label in ("V", "A", "L", "clean"):  # either: at least the checks' union and the dynamics
        assert rate["union_dynamics"][label] >= max(rate["union"][label],
                                                     rate["dynamics"][label]) - 1e-9
    found = report["noise_found_at_valid_share"]
    assert set(found["union_dynamics"]) == {"0.05", "0.1", "0.2", "0.3", "0.5"}
    for figure in ("auc dynamics", "auc union_dynamics", "union_dynamics A+L",
                   "dynamics V+F", "union_dynamics A+L found at V+F 5%"):
        spread = report["intervals"][figure]
        assert spread["low"] <= spread["high"] and spread["replicates"] >= 2
    assert not list(tmp_path.glob("tmp*"))  # the Boss's folder goes with the run


def test_one_pass_has_no_dynamics(corpus, tmp_path, caplog):  # noqa: F811
    path, labelled = corpus
    out = tmp_path / "report.json"
    code = check_report.cli_main([str(labelled), "--clean", str(path / "clean"), "--src", "en",
                                  "--tgt", "de", "--out", str(out), "--dynamics-passes", "1"])
    assert code == 2 and not out.exists()
    assert "--dynamics-passes 1" in caplog.text and "give 2 or more" in caplog.text


def test_the_union_ranks_flagged_pairs_first_and_dropped_pairs_above_all():
    kept = np.array([0, 1, 2, 3])
    n = 5  # pair 4 was dropped by the preparation
    dropped = np.array([False, False, False, False, True])
    union = np.array([True, False, False, False, True])
    union_score = np.array([2.0, 0.1, 0.2, 0.3, np.inf])
    score = np.array([0.0, 5.0, 0.1, 0.2])
    flags = np.array([False, True, False, False])
    cols = check_dynamics.dynamics_columns(kept, n, dropped, union, union_score, score, flags)
    assert cols["flag"]["union_dynamics"].tolist() == [True, True, False, False, True]
    assert np.isnan(cols["score"]["dynamics"][4])
    ranked = cols["score"]["union_dynamics"]
    assert ranked[4] == np.inf
    assert min(ranked[0], ranked[1]) > max(ranked[2], ranked[3])
