"""research/drop_noise.py and research/compare_results.py: the noise-filter oracle's corpus and
its comparison against another benchmark's baseline."""

import json
import shutil
import sys

import numpy as np
import pytest

import warm
from utils import REPO

from research import compare_results

LABELS = ("clean", "copy", "clean", "misaligned", "clean", "wrong_lang")


def _noisy_copy(tiny_data, tmp_path):
    """tiny_data with labels: raw line i+1 is binarised pair i (line 0 was dropped)."""
    data = tmp_path / "noisy"
    shutil.copytree(tiny_data, data)
    n = len(np.load(data / "train.src-tgt.autoassist.indptr.npy")) - 1
    labels = [LABELS[i % len(LABELS)] for i in range(n + 1)]
    (data / "train.noise-labels").write_text("\n".join(labels) + "\n")
    (data / "train.kept-lines").write_text("".join(f"{i + 1}\n" for i in range(n)))
    return data, labels, n


def _run(*args):
    return warm.run([sys.executable, "-m", "research.drop_noise", *map(str, args)],
                    capture_output=True, text=True, timeout=120, cwd=REPO)


def test_only_the_clean_pairs_are_kept_token_for_token(tiny_data, tmp_path):
    from fairseq.data import indexed_dataset

    data, labels, n = _noisy_copy(tiny_data, tmp_path)
    proc = _run("--data", data, "--out", tmp_path / "oracle")
    assert proc.returncode == 0, proc.stderr
    clean = [i for i in range(n) if labels[i + 1] == "clean"]
    assert f"kept {len(clean)} of {n} pairs" in proc.stdout
    out = tmp_path / "oracle"
    assert np.loadtxt(out / "train.kept-lines", dtype=int).tolist() == [i + 1 for i in clean]
    for lang in ("src", "tgt"):
        whole = indexed_dataset.make_dataset(str(data / f"train.src-tgt.{lang}"), impl="mmap")
        kept = indexed_dataset.make_dataset(str(out / f"train.src-tgt.{lang}"), impl="mmap")
        assert len(kept) == len(clean)
        assert all(np.array_equal(kept[j], whole[i]) for j, i in enumerate(clean))
    # same dictionaries and valid set; features for the kept pairs only
    assert (out / "dict.src.txt").read_text() == (data / "dict.src.txt").read_text()
    assert (out / "valid.src-tgt.src.bin").resolve() == (data / "valid.src-tgt.src.bin").resolve()
    meta = json.loads((out / "train.src-tgt.autoassist.json").read_text())
    assert meta["num_rows"] == len(clean)


def test_by_checks_drops_the_pairs_the_tasks_pair_checks_flag(tiny_data, tmp_path):
    """--by checks needs no labels: it keeps the pairs the task would not take for suspect
    (the feature file's checks at its recorded settings), token for token."""
    from fairseq.data import indexed_dataset

    from autoassist_fairseq.features.store import FeatureStore

    data, labels, n = _noisy_copy(tiny_data, tmp_path)
    checks_path = data / "train.src-tgt.autoassist.pair-checks.npy"
    checks = np.load(checks_path)
    chosen = [0, 5, 9, n - 1]
    checks[chosen, 2] = 1.0  # unrelated sides: a p-value of 1 is over any bar
    np.save(checks_path, checks)
    suspect = FeatureStore.open(str(data / "train.src-tgt.autoassist")).suspect_pairs()
    assert set(chosen) <= set(np.flatnonzero(suspect).tolist())
    proc = _run("--data", data, "--by", "checks", "--out", tmp_path / "checked")
    assert proc.returncode == 0, proc.stderr
    keep = np.flatnonzero(~suspect).tolist()
    assert f"kept {len(keep)} of {n} pairs; dropped flagged {n - len(keep)}" in proc.stdout
    # the labels, where the corpus has them, say what the checks dropped
    kinds = [labels[i + 1] for i in range(n)]
    copies = [i for i in range(n) if kinds[i] == "copy"]
    dropped_copies = sum(1 for i in copies if suspect[i])
    assert f"copy {dropped_copies} of {len(copies)}" in proc.stdout, proc.stdout
    # --drop-share: the flagged pairs and the next ones by the union's score, counted apart
    share = (int(suspect.sum()) + 10) / n
    proc = _run("--data", data, "--by", "checks", "--drop-share", share, "--out", tmp_path / "c3")
    assert proc.returncode == 0, proc.stderr
    assert f"kept {n - int(suspect.sum()) - 10} of {n} pairs; dropped flagged " \
        f"{int(suspect.sum())}, ranked 10" in proc.stdout, proc.stdout
    assert _run("--data", data, "--drop-share", 0.2, "--out", tmp_path / "c4").returncode == 2
    (data / "train.noise-labels").unlink()  # labels are not needed
    assert _run("--data", data, "--by", "checks", "--out", tmp_path / "c2").returncode == 0
    out = tmp_path / "checked"
    assert np.loadtxt(out / "train.kept-lines", dtype=int).tolist() == [i + 1 for i in keep]
    whole = indexed_dataset.make_dataset(str(data / "train.src-tgt.tgt"), impl="mmap")
    kept = indexed_dataset.make_dataset(str(out / "train.src-tgt.tgt"), impl="mmap")
    assert all(np.array_equal(kept[j], whole[i]) for j, i in enumerate(keep))
    # a feature file without pair checks is a clear error, not an unfiltered copy
    checks_path.unlink()
    proc = _run("--data", data, "--by", "checks", "--out", tmp_path / "again")
    assert proc.returncode != 0 and "pair-checks" in proc.stderr, proc.stderr


def test_missing_labels_and_foreign_labels_are_clear_errors(tiny_data, tmp_path):
    data, labels, n = _noisy_copy(tiny_data, tmp_path)
    (data / "train.noise-labels").unlink()
    proc = _run("--data", data, "--out", tmp_path / "o1")
    assert proc.returncode != 0 and "train.noise-labels not found" in proc.stderr
    (data / "train.noise-labels").write_text("clean\n" * 3)
    proc = _run("--data", data, "--out", tmp_path / "o2")
    assert proc.returncode != 0 and "belong to another corpus" in proc.stderr
    proc = _run("--data", data, "--out", data)
    assert proc.returncode != 0 and "must differ" in proc.stderr
    (data / "train.noise-labels").write_text("\n".join(labels) + "\n")
    (data / "train.kept-lines").write_text("1\n2\n")  # another corpus's mapping
    proc = _run("--data", data, "--out", tmp_path / "o3")
    assert proc.returncode != 0 and f"2 lines for {n} binarised pairs" in proc.stderr
    assert not (tmp_path / "o3").exists()  # nothing written
    (data / "train.kept-lines").write_text("".join(f"{i + 1}\n" for i in range(n)))
    (data / "train.noise-labels").write_text("copy\n" * (n + 1))
    proc = _run("--data", data, "--out", tmp_path / "o4")
    assert proc.returncode != 0 and "no pair" in proc.stderr and "labelled clean" in proc.stderr


def _curve(losses, tokens_per_point, wall_per_point):
    return [{"epoch": k + 1, "updates": 10 * (k + 1), "valid_loss": loss,
             "wall": wall_per_point * (k + 1), "boss_tokens": tokens_per_point * (k + 1)}
            for k, loss in enumerate(losses)]


def test_arms_are_compared_with_the_other_benchmarks_baseline_of_their_seed(tmp_path):
    base = {"curves": {"baseline-s1": _curve([5.0, 4.0], 100, 10),
                       "baseline-s2": _curve([5.0, 4.5], 100, 10)},
            "bleu_curves": {"baseline-s1": [{"boss_tokens": 200, "wall": 20, "bleu": 10.0}]}}
    run = {"curves": {"baseline-s1": _curve([4.6, 3.8], 80, 10),
                      "autoassist-s1": _curve([4.8, 4.2], 100, 12),
                      "baseline-s3": _curve([4.0], 100, 10)},
           "bleu_curves": {"baseline-s1": [{"boss_tokens": 80, "wall": 10, "bleu": 8.0},
                                           {"boss_tokens": 160, "wall": 20, "bleu": 12.0}]}}
    table = compare_results.compare([base], run)
    assert set(table) == {1}  # seed 3 has no baseline in --base
    oracle = table[1]["baseline"]
    # 4.6 -> 3.8 between 80 and 160 tokens reaches the base's best 4.0 at 140: 0.7x its 200
    assert oracle["tokens_to_target_loss_ratio"] == pytest.approx(0.7)
    assert oracle["valid_loss_at_equal_tokens"] == pytest.approx(3.8)  # equal tokens: 160
    assert oracle["tokens_to_target_bleu_ratio"] == pytest.approx((80 + 80 * 1.8 / 4) / 200)
    assert table[1]["autoassist"]["tokens_to_target_loss_ratio"] is None  # never reaches 4.0
    # the base's own baseline at the same equal tokens: 5.0 -> 4.0 between 100 and 200
    assert table[1]["base:baseline"]["valid_loss_at_equal_tokens"] == pytest.approx(4.4)
    assert "| 1 | baseline | 0.000M" in compare_results.markdown(table)
    for name, results in (("base", base), ("run", run)):
        (tmp_path / f"{name}.json").write_text(json.dumps(results))
    proc = warm.run([sys.executable, "-m", "research.compare_results", "--base",
                     tmp_path / "base.json", "--run", tmp_path / "run.json", "--out",
                     tmp_path / "c.json"], capture_output=True, text=True, timeout=60,
                    cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    saved = json.loads((tmp_path / "c.json").read_text())
    assert saved["seeds"]["1"]["baseline"]["tokens_to_target_loss_ratio"] == pytest.approx(0.7)
    run["curves"] = {"baseline-s9": run["curves"]["baseline-s1"]}
    (tmp_path / "run.json").write_text(json.dumps(run))
    proc = warm.run([sys.executable, "-m", "research.compare_results", "--base",
                     tmp_path / "base.json", "--run", tmp_path / "run.json"],
                    capture_output=True, text=True, timeout=60, cwd=REPO)
    assert proc.returncode != 0 and "no seed of --run has a baseline" in proc.stderr
