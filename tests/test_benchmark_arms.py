"""research/bench's --arm (a further AutoAssist arm, here annealing by updates) and
--noise-labels (the noise share of what each arm skips), on the tiny corpus in 20 updates."""

import json
import os
import sys

import pytest

import warm
from utils import REPO, TINY_TRANSFORMER

from autoassist_fairseq import diagnose
from autoassist_fairseq.features.prepared import flagged_pairs

CONFIG = TINY_TRANSFORMER + [
    "--optimizer", "adam", "--lr", "0.005", "--lr-scheduler", "inverse_sqrt",
    "--warmup-updates", "20", "--criterion", "label_smoothed_cross_entropy",
    "--label-smoothing", "0.1", "--max-tokens", "600", "--no-epoch-checkpoints",
    "--num-workers", "0"]


def test_an_extra_arm_and_the_noise_report(tiny_data, tmp_path):
    # a view of tiny_data with train.kept-lines (raw line of every pair: here, the same)
    data = tmp_path / "data"
    data.mkdir()
    for path in tiny_data.iterdir():
        (data / path.name).symlink_to(path)
    sources = (tiny_data.parent / "raw" / "train.src").read_text().splitlines()
    (data / "train.kept-lines").write_text("".join(f"{i}\n" for i in range(len(sources))))
    # the toy corpus's noisy pairs carry the source word "noise" and a random target
    labels = ["misaligned" if "noise" in s.split() else "clean" for s in sources]
    (tmp_path / "labels").write_text("\n".join(labels) + "\n")
    config = tmp_path / "tiny.args"
    config.write_text(" ".join(CONFIG).replace(" --", "\n--") + "\n")
    out = tmp_path / "out"
    proc = warm.run(
        [sys.executable, "-m", "research.bench", "--data", data, "--config", config,
         "--out", out, "--max-update", "20", "--validations", "0", "--skip-bleu", "--no-random",
         "--autoassist-args", "--assistant-window 256",
         "--arm", "anneal=--assistant-window 256 --assistant-anneal 0.5",
         "--noise-labels", tmp_path / "labels"],
        capture_output=True, text=True, timeout=600, env=dict(os.environ, OMP_NUM_THREADS="1"),
        cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "WARNING" not in proc.stderr, proc.stderr[-3000:]  # e.g. a failed diagnosis
    results = json.loads((out / "results.json").read_text())
    # the verdict autoassist-diagnose gives the corpus: from the share of pairs its feature
    # file's checks flag (the arms' own skips play no part)
    flagged = flagged_pairs(tiny_data, "src", "tgt")[0]
    verdict = diagnose.verdict(float(flagged.mean()))[0]
    assert set(results["curves"]) == {"baseline-s1", "autoassist-s1", "anneal-s1"}
    assert results["arm_args"]["anneal"]["args"] == ["--assistant-window", "256",
                                                     "--assistant-anneal", "0.5",
                                                     "--assistant-sync"]
    row = results["per_seed"][0]
    assert row["budget_updates"] == 20
    assert set(row["arms"]) == {"baseline", "autoassist", "anneal"}
    assert row["arms"]["anneal"]["final"]["updates"] == 20
    # the arm ran with its flags, under AutoAssist, and annealed in its second half
    log = (out / "anneal-s1" / "train.log").read_text()
    assert "--task autoassist_translation" in log and "--assistant-anneal 0.5" in log
    assert log.count("AutoAssist annealing: every pair is accepted") == 1
    assert "AutoAssist annealing" not in (out / "autoassist-s1" / "train.log").read_text()
    # the noise report: each Assistant arm's last checkpoint diagnosed with the labels
    assert results["noise_labels"] == str(tmp_path / "labels")
    noisy_share = labels.count("misaligned") / len(labels)
    for arm in ("autoassist", "anneal"):
        m = row["arms"][arm]
        assert m["noise"]["corpus"] == pytest.approx(noisy_share, abs=0.05), arm
        assert 0 <= m["noise"]["skipped"] <= 1 and 0 < m["noise"]["trained"] < 1, arm
        assert set(m["noise_by_kind"]) == {"clean", "misaligned"}, arm
        assert m["verdict"] == verdict, (arm, m["verdict"], flagged.mean())
    baseline = row["arms"]["baseline"]["noise"]  # uniform batches: the corpus share
    assert baseline["trained"] == baseline["corpus"] == row["arms"]["autoassist"]["noise"]["corpus"]
    report = (out / "results.md").read_text()
    assert "## Tokens skipped by noise kind" in report
    assert "| 1 | anneal |" in report
