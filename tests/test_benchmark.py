"""research.bench: every arm at equal compute on a tiny corpus, and its target/ratio logic."""

import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import warm
from utils import REPO, TINY_TRANSFORMER, children, running

from research.bench import BenchmarkError, budgets, cli, flags, logs, metrics, report, runs

BENCH = [sys.executable, "-m", "research.bench"]  # run from the repository root (cwd=REPO)

TINY_ARGS = TINY_TRANSFORMER + [
    "--optimizer", "adam", "--lr", "0.005", "--lr-scheduler", "inverse_sqrt",
    "--warmup-updates", "20", "--criterion", "label_smoothed_cross_entropy",
    "--label-smoothing", "0.1", "--max-tokens", "600", "--no-epoch-checkpoints",
    "--num-workers", "0"]


def point(loss, tokens, wall, epoch):
    return {"epoch": epoch, "updates": 10 * epoch, "valid_loss": loss, "wall": wall,
            "boss_tokens": tokens, "boss_padded_tokens": None}


def to_target(base, arm):
    """arm_metrics of *arm* against *base*, without BLEU, at the arm's last tokens and wall."""
    return metrics.arm_metrics(arm, [], base, [], arm[-1]["boss_tokens"], arm[-1]["wall"])


def test_target_reached_at_second_validation():
    base = [point(5.0, 100, 10, 1), point(4.0, 200, 20, 2), point(3.5, 300, 30, 3)]
    aa = [point(4.5, 90, 12, 1), point(3.4, 180, 24, 2), point(3.3, 270, 40, 3)]
    result = to_target(base, aa)
    assert result["target_loss"] == 3.5
    # between the first two validations (4.5 -> 3.4), not at the best
    assert result["tokens_to_target_loss"] == pytest.approx(90 + 90 * 1.0 / 1.1)
    assert result["tokens_to_target_loss_ratio"] == pytest.approx((90 + 90 / 1.1) / 300)
    assert result["wall_to_target_loss_ratio"] == pytest.approx((12 + 12 / 1.1) / 30)


def test_target_is_the_first_baseline_validation_at_its_best():
    base = [point(4.0, 100, 10, 1), point(3.0, 200, 20, 2), point(3.0, 300, 30, 3)]
    aa = [point(3.0, 150, 15, 1)]
    result = to_target(base, aa)
    # the baseline reaches its best at its second validation, the arm at its first
    assert metrics.crossing(base, "boss_tokens", result["target_loss"]) == 200
    assert result["tokens_to_target_loss_ratio"] == 150 / 200


def test_target_not_reached():
    base = [point(5.0, 100, 10, 1), point(4.0, 200, 20, 2)]
    aa = [point(4.5, 90, 12, 1), point(4.01, 180, 25, 2)]
    result = to_target(base, aa)
    assert result["tokens_to_target_loss"] is None and result["wall_to_target_loss"] is None
    assert result["tokens_to_target_loss_ratio"] is None
    assert result["wall_to_target_loss_ratio"] is None
    assert metrics.mean([0.5, None]) is None and metrics.mean([0.5, 0.7]) == 0.6


def _fairseq_batch_order(num_batches, seed, epoch):
    """The order fairseq's own EpochBatchIterator trains *num_batches* fixed batches in,
    epoch *epoch* (shuffled with seed + epoch): each batch here is its own number."""
    from fairseq.data import FairseqDataset, iterators

    class Numbers(FairseqDataset):
        def __getitem__(self, i):
            return i

        def __len__(self):
            return num_batches

    itr = iterators.EpochBatchIterator(
        Numbers(), collate_fn=lambda items: items[0],
        batch_sampler=[[i] for i in range(num_batches)], seed=seed, epoch=epoch)
    return list(itr.next_epoch_itr(shuffle=True))


@pytest.mark.filterwarnings("ignore:'pin_memory' argument")
def test_baseline_tokens_count_full_epochs_and_shuffled_partial_epochs():
    counts = np.array([[10, 12], [20, 25], [30, 31]])
    assert budgets.baseline_tokens_at(counts, [1], 1, 3, 6) == (120, 136)
    partial = budgets.baseline_tokens_at(counts, [1], 1, 2, 4)  # epoch 2, 1 of 3 batches
    first = _fairseq_batch_order(3, 1, 2)[0]
    assert partial == tuple(int(x) for x in counts.sum(axis=0) + counts[first])
    assert budgets.baseline_tokens_at(counts, [2], 1, 2, 4) == (120, 136)  # 2 updates/epoch
    # 8 batches of distinct powers of two: a partial epoch's sum names the batches it took,
    # which are the first ones of fairseq's order for that epoch (seed + epoch), in order
    counts = np.stack([2 ** np.arange(8), 3 * 2 ** np.arange(8)], axis=1)
    for seed, epoch, taken in [(1, 2, 3), (1, 3, 3), (5, 2, 5)]:
        order = _fairseq_batch_order(8, seed, epoch)
        assert order != list(range(8))
        expected = counts.sum(axis=0) * (epoch - 1) + counts[order[:taken]].sum(axis=0)
        updates = 8 * (epoch - 1) + taken
        assert budgets.baseline_tokens_at(counts, [1], seed, epoch, updates) == tuple(
            int(x) for x in expected), (seed, epoch, order)


def test_log_parsing_continues_wall_after_a_resume():
    h = logs.HEADER
    text = "\n".join([
        h + "cmd", "x | INFO | valid | epoch 001 | valid on 'valid' subset | loss 5.5 | "
        "num_updates 10", "x | INFO | train | epoch 001 | loss 6 | aa_boss_tok 100 | "
        "aa_wait_s 0.5 | num_updates 10 | train_wall 4 | wall 5",
        "x | INFO | train_inner | epoch 002:      3 / 10 loss=5.9, aa_boss_tok=130, "
        "num_updates=13, wall=7", h + "cmd",
        "x | INFO | valid | epoch 002 | valid on 'valid' subset | loss 5.2 | num_updates 20",
        "x | INFO | train | epoch 002 | loss 5.4 | aa_boss_tok 200 | aa_wait_s 1.5 | "
        "num_updates 20 | train_wall 4 | wall 6"])
    records = logs.parse_log(text)
    curve = logs.build_curve(records, lambda e, u, t: (t.get("aa_boss_tok"), None))
    assert [(p["epoch"], p["valid_loss"], p["wall"], p["boss_tokens"]) for p in curve] == [
        (1, 5.5, 5, 100), (2, 5.2, 11, 200)]
    train = [r for r in records if r["tag"] == "train"]
    assert logs.epochs_trained(records) == 2
    # both segments' train lines survive the resume: waits 0.5 + 1.5 over train_wall 4 + 4
    assert sum(r["aa_wait_s"] for r in train) / sum(r["train_wall"] for r in train) == 2 / 8
    assert max(r["aa_boss_tok"] for r in train) == 100 * logs.epochs_trained(records)


def test_config_flags_for_both_runs(tmp_path):
    tokens = ["--task", "autoassist_translation", "--user-dir", "x", "--assistant-window", "9",
              "--max-epoch", "8", "--lr", "-1", "--cpu"]
    base = flags.build_run_args(tokens, "baseline", 3, tmp_path, ["--max-update", "5"], [], [])
    assert base[:2] == ["--task", "translation"] and "--assistant-window" not in base
    assert "--max-epoch" not in base and flags.get_flag(base, "--lr") == "-1"
    assert base.count("--cpu") == 1 and flags.get_flag(base, "--seed") == "3"
    aa = flags.build_run_args(tokens, "autoassist", 3, tmp_path, [], [],
                                  ["--assistant-lr", "1"])
    assert flags.get_flag(aa, "--task") == "autoassist_translation"
    assert flags.get_flag(aa, "--max-epoch") == "8"
    assert flags.get_flag(aa, "--user-dir") == str(REPO / "autoassist_fairseq")


def _tiny_config(tmp_path):
    config = tmp_path / "tiny.args"
    lines = ["# a tiny transformer: one flag (and its value) per line"]
    for token in TINY_ARGS:
        if token.startswith("--"):
            lines.append(token)
        else:
            lines[-1] += " " + token
    config.write_text("\n".join(lines) + "\n")
    return config


def test_benchmark_end_to_end(tiny_data, tmp_path):
    config = _tiny_config(tmp_path)
    tiny_data = _with_test_split(tiny_data, tmp_path / "data")
    out = tmp_path / "out"
    env = dict(os.environ, OMP_NUM_THREADS="1")

    def benchmark_run(*flags, timeout=300):
        return warm.run(
            [*BENCH, "--data", tiny_data, "--config",
             config, "--out", out, "--max-epoch", "2", "--validations", "4", "--extra-args",
             "--log-interval 5", *flags], capture_output=True, text=True, cwd=REPO, timeout=timeout,
            env=env)

    proc = benchmark_run("--skip-bleu", "--autoassist-args", "--assistant-window 256",
                         timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    for key in ("per_seed", "curves", "command", "date", "machine", "arms", "bleu_curves",
                "budget", "arm_args", "run_args"):
        assert key in results
    assert results["command"][:3] == ["python", "-m", "research.bench"]
    for key in ("tokens_to_target_loss_ratio", "wall_to_target_loss_ratio", "final_bleu",
                "wall_per_mtok"):
        assert key in results["arms"]["autoassist"], key
    assert "AutoAssist vs baseline" not in (out / "results.md").read_text()
    assert set(results["curves"]) == {"baseline-s1", "autoassist-s1", "random-s1"}
    base_curve = results["curves"]["baseline-s1"]
    # validations inside the epochs too: about 4 over the budget, each at a log line's update
    budget = base_curve[-1]["updates"]
    interval = math.ceil(math.ceil(budget / 4) / 5) * 5  # --validations 4, --log-interval 5
    for name, curve in results["curves"].items():
        assert set(range(interval, budget, interval)) <= {p["updates"] for p in curve}, name
    assert base_curve[-1]["boss_tokens"] == 2 * results["per_seed"][0]["baseline_tokens_per_epoch"]
    # equal compute: every arm stops at the baseline's update count, with tokens close to
    # the baseline's (a skipping arm runs more, shorter epochs)
    row = results["per_seed"][0]
    budget = base_curve[-1]["updates"]
    # each run's records are fairseq's JSON lines; an epoch's updates, from their fractional
    # "update", are those fairseq's GroupedIterator logs at the epoch's start (the
    # baseline's: its batches, as the harness counts them), so the baseline trained 2 epochs
    for arm in row["arms"]:
        text = (out / f"{arm}-s1" / "train.log").read_text()
        records = logs.parse_log(text)
        sizes = [int(n) for n in re.findall(r"grouped total_num_itrs = (\d+)", text)]
        inner = [r for r in records if r["tag"] == "train_inner"]
        assert inner and "| train_inner | {" in text, arm
        assert [r["epoch_updates"] for r in inner] == [sizes[r["epoch"] - 1] for r in inner]
        assert row["arms"][arm]["epochs_trained"] == logs.epochs_trained(records), arm
        if arm == "baseline":
            assert sizes == [row["baseline_batches_per_epoch"]] * 2
    assert row["arms"]["baseline"]["epochs_trained"] == 2.0
    assert row["budget_updates"] == budget
    for name, curve in results["curves"].items():
        tokens = [p["boss_tokens"] for p in curve]
        assert all(0 < a < b for a, b in zip(tokens, tokens[1:])), name
        assert curve[-1]["updates"] == budget, name
        assert abs(tokens[-1] / base_curve[-1]["boss_tokens"] - 1) < 0.25, name
    # the control skips at AutoAssist's measured token acceptance of each data pass
    # (from the arm's pass log, one record per finished pass, as many as its pass lines)
    aa_text = (out / "autoassist-s1" / "train.log").read_text()
    passes = logs.read_passes(out / "autoassist-s1" / logs.PASS_LOG)
    rates = logs.random_rates([], "", passes)
    assert rates.count(",") + 1 == len(passes) == len(logs.PASS_LINE.findall(aa_text)) >= 2
    assert rates == logs.random_rates(logs.parse_log(aa_text), aa_text)
    random_log = (out / "random-s1" / "train.log").read_text()
    assert "--assistant-rule random " in random_log
    assert f"--assistant-random-rates {rates}" in random_log
    # every AutoAssist arm runs in the deterministic mode, so that reruns repeat
    assert "--assistant-sync" in random_log and "--assistant-sync" in aa_text
    assert "--assistant-window 256" not in random_log
    for arm, m in row["arms"].items():
        assert m["final"]["updates"] == budget
        assert m["valid_loss_at_equal_tokens"] is not None, arm
        assert m["equal_tokens"] == min(c[-1]["boss_tokens"] for c in results["curves"].values())
    assert row["arms"]["baseline"]["tokens_to_target_loss_ratio"] == 1.0
    assert (out / "curves.png").stat().st_size > 0
    assert "Every arm at equal compute" in (out / "results.md").read_text()
    # a variant shares the baseline run and writes its own results
    variant_flags = ("--variant", "w128", "--no-random", "--autoassist-args",
                     "--assistant-window 128")
    proc = benchmark_run("--skip-bleu", *variant_flags)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "[baseline-s1] finished before: reusing" in proc.stdout
    variant = json.loads((out / "results-w128.json").read_text())
    assert set(variant["curves"]) == {"baseline-s1", "autoassist-w128-s1"}
    assert variant["curves"]["baseline-s1"] == results["curves"]["baseline-s1"]
    assert "--assistant-window 128" in (out / "autoassist-w128-s1" / "train.log").read_text()
    assert "variant w128" in (out / "results-w128.md").read_text()
    assert json.loads((out / "results.json").read_text()) == results  # left as it was
    # --bleu-kept scores the checkpoints those --skip-bleu runs kept, without retraining
    proc = benchmark_run("--bleu-kept", *variant_flags)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "training;" not in proc.stdout and "resuming;" not in proc.stdout, proc.stdout
    assert proc.stdout.count("finished before: reusing") == 2, proc.stdout
    scored = json.loads((out / "results-w128.json").read_text())
    assert scored["bleu_checkpoints"] == "kept by the config"
    assert scored["curves"] == variant["curves"]
    for arm, m in scored["per_seed"][0]["arms"].items():
        assert m["final_bleu"] is not None, arm  # checkpoint_last.pt, the only one kept
        assert m["tokens_to_target_bleu"] is None and m["wall_to_target_bleu"] is None, arm
    assert scored["per_seed"][0]["arms"]["baseline"]["final_bleu"] is not None
    assert "--bleu-kept" in (out / "results-w128.md").read_text()


def _with_test_split(data, root):
    """A view of binarised *data* (symlinks) whose valid set doubles as the test set that
    scripts/evaluate.sh translates and scores (references: raw/test.tgt)."""
    (root / "raw").mkdir(parents=True)
    for path in Path(data).iterdir():
        (root / path.name).symlink_to(path)
        if path.name.startswith("valid."):
            (root / path.name.replace("valid.", "test.", 1)).symlink_to(path)
    (root / "raw" / "test.tgt").symlink_to(Path(data).parent / "raw" / "valid.tgt")
    return root


def test_skip_bleu_and_bleu_kept_exclude_each_other(tiny_data, tmp_path):
    proc = warm.run(
        [*BENCH, "--data", tiny_data, "--config",
         _tiny_config(tmp_path), "--out", tmp_path / "out", "--max-epoch", "1",
         "--skip-bleu", "--bleu-kept"], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert proc.returncode != 0
    assert "--skip-bleu and --bleu-kept: choose one" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_crossing_and_values_are_interpolated_between_measurements():
    curve = [point(5.0, 100, 10, 1), point(4.0, 200, 30, 2), point(3.0, 300, 40, 3)]
    assert metrics.crossing(curve, "boss_tokens", 3.5) == pytest.approx(250)
    assert metrics.crossing(curve, "wall", 3.5) == pytest.approx(35)
    assert metrics.crossing(curve, "boss_tokens", 5.5) == 100  # reached at the first
    assert metrics.crossing(curve, "boss_tokens", 2.9) is None
    bleus = [{"boss_tokens": 100, "wall": 10, "bleu": 10.0},
             {"boss_tokens": 300, "wall": 40, "bleu": 20.0}]
    assert metrics.crossing(bleus, "boss_tokens", 15.0, "bleu",
                              lower_is_better=False) == pytest.approx(200)
    assert metrics.value_at(bleus, "wall", 25, "bleu") == pytest.approx(15.0)
    assert metrics.value_at(curve, "boss_tokens", 350) is None


def test_arm_metrics_against_the_baseline():
    base = [point(5.0, 100, 10, 1), point(4.0, 200, 20, 2)]
    arm = [point(4.6, 80, 10, 1), point(3.8, 160, 20, 2), point(3.6, 240, 30, 3)]
    base_bleu = [{"epoch": 2, "updates": 20, "boss_tokens": 200, "wall": 20, "bleu": 10.0}]
    arm_bleu = [{"epoch": 1, "updates": 10, "boss_tokens": 80, "wall": 10, "bleu": 8.0},
                {"epoch": 3, "updates": 30, "boss_tokens": 240, "wall": 30, "bleu": 12.0}]
    m = metrics.arm_metrics(arm, arm_bleu, base, base_bleu, equal_tokens=200, equal_wall=20)
    assert m["target_loss"] == 4.0 and m["target_bleu"] == pytest.approx(9.8)
    # 4.6 -> 3.8 between 80 and 160 tokens: 4.0 at 140
    assert m["tokens_to_target_loss"] == pytest.approx(140)
    assert m["tokens_to_target_loss_ratio"] == pytest.approx(140 / 200)
    assert m["valid_loss_at_equal_tokens"] == pytest.approx(3.7)
    assert m["bleu_at_equal_tokens"] == pytest.approx(11.0)
    assert m["tokens_to_target_bleu"] == pytest.approx(80 + 160 * 1.8 / 4)
    assert m["wall_to_target_bleu_ratio"] == pytest.approx((10 + 20 * 1.8 / 4) / 20)
    # the table tells apart token counts that differ by less than 1%
    m["final"]["boss_tokens"] = 7_048_510
    row, = report.arm_rows({"random": m}, 1)
    assert row.startswith("| 1 | random |") and "| 7.049M |" in row


def test_noise_kind_table_lists_every_kind_of_every_arm():
    kind = lambda skipped, loss: {"skipped_share": skipped, "mean_loss": loss}  # noqa: E731
    per_seed = [{"seed": 1, "arms": {
        "baseline": {"noise": {"trained": 0.2}},
        "autoassist": {"noise_by_kind": {"clean": kind(0.3, 2.0), "copy": kind(0.6, 1.0)}},
        "learnable": {"noise_by_kind": {"clean": kind(0.2, 2.1), "misaligned": kind(0.5, 9.0)}},
        "checks": {"noise_by_kind": {"clean": dict(kind(0.1, 2.2), pair_checks_flagged=0.001),
                                     "copy": dict(kind(0.9, 1.1), pair_checks_flagged=0.995)}},
    }}]
    rows = report.noise_kind_rows(per_seed)
    assert "| seed | arm | clean | copy | misaligned |" in rows
    assert "| 1 | autoassist | 30.0% (2.00) | 60.0% (1.00) | n/a |" in rows
    assert "| 1 | learnable | 20.0% (2.10) | n/a | 50.0% (9.00) |" in rows
    assert "| 1 | checks | 10.0% (2.20; 0.1% flagged) | 90.0% (1.10; 99.5% flagged) | n/a |" in rows
    assert not any("baseline" in r for r in rows)
    assert report.noise_kind_rows([{"seed": 1, "arms": {"baseline": {}}}]) == []
    # diagnoses that give the reducible loss: each kind's mean above the floor, and the
    # share of the reducible loss each arm's skips remove
    per_seed[0]["arms"]["autoassist"].update(skipped_share_reducible_loss=0.2, skip_density=0.5)
    per_seed[0]["arms"]["autoassist"]["noise_by_kind"]["clean"]["mean_reducible_loss"] = 0.78
    rows = report.noise_kind_rows(per_seed)
    assert "| seed | arm | clean | copy | misaligned | reducible loss skipped (density) |" in rows
    assert "| 1 | autoassist | 30.0% (2.00 / 0.78) | 60.0% (1.00) | n/a | 20.0% (0.50) |" in rows
    assert "| 1 | learnable | 20.0% (2.10) | n/a | 50.0% (9.00) | n/a (n/a) |" in rows


def test_random_rates_come_from_the_autoassist_log():
    records = [{"tag": "train", "epoch": e, "num_updates": 10 * e, "aa_accept_tok": r}
               for e, r in ((2, 0.81234), (1, 1.0), (3, 0.0))]
    # per data pass when the log has pass lines (a pass logged again after a resume: the
    # later line; other shards' lines are not rank 0's)
    line = "2026-11-24 14:31:59 | INFO | autoassist_fairseq.data.batch_stream | " \
           "AutoAssist data pass {} (shard {}): accepted {} of its tokens, 0.9 of its pairs\n"
    text = "".join(line.format(*a) for a in ((1, 0, "0.9400"), (2, 0, "0.7500"),
                                             (2, 1, "0.1000"), (2, 0, "0.7300")))
    assert logs.random_rates(records, text) == "0.9400,0.7300"
    with pytest.raises(BenchmarkError, match=r"data pass\(es\) \[1\]"):
        logs.random_rates(records, line.format(2, 0, "0.7"))
    # logs of older versions: per epoch
    assert logs.random_rates(records) == "1.0000,0.8123,0.0001"
    with pytest.raises(BenchmarkError, match="aa_accept_tok"):
        logs.random_rates([{"tag": "train", "epoch": 1, "num_updates": 5}])


def test_random_rates_come_from_the_pass_log_and_old_runs_lines(tmp_path):
    """The plugin's pass log is what research reads; a run started before it existed is
    read from its train.log's pass lines, for the passes the pass log lacks."""
    from autoassist_fairseq.data.batch_stream import pass_record

    def record(data_pass, shard, accepted):
        return json.dumps(pass_record(data_pass, shard, dict(
            considered_pairs=10, accepted_pairs=5, considered_tokens=1000,
            accepted_tokens=accepted))) + "\n"

    path = tmp_path / logs.PASS_LOG
    assert logs.read_passes(path) == {}
    # a pass recorded again after a resume: the later record; shard 1 is not rank 0's
    path.write_text(record(1, 0, 940) + record(2, 0, 750) + record(2, 1, 100)
                    + record(2, 0, 730) + record(3, 0, 0))
    assert logs.read_passes(path) == {1: 0.94, 2: 0.73, 3: 0.0}
    assert logs.random_rates([], "", logs.read_passes(path)) == "0.9400,0.7300,0.0001"
    line = "2026-11-24 14:31:59 | INFO | autoassist_fairseq.data.batch_stream | " \
           "AutoAssist data pass {} (shard 0): accepted {} of its tokens, 0.9 of its pairs\n"
    # the records win over lines of the same pass; pass 1 only in the log (an older start)
    path.write_text(record(2, 0, 500))
    text = line.format(1, "0.9000") + line.format(2, "0.6000")
    assert logs.random_rates([], text, logs.read_passes(path)) == "0.9000,0.5000"
    with pytest.raises(BenchmarkError, match=r"data pass\(es\) \[1\]"):
        logs.random_rates([], "", logs.read_passes(path))


def test_an_assistant_run_writes_its_pass_log_beside_its_train_log(tmp_path):
    """The pass log names where the run writes, not what it trains: a finished run made
    without it (or at another place) is the same command."""
    save = tmp_path / "aa-s1" / "checkpoints"
    aa = flags.build_run_args(["--max-epoch", "2"], "autoassist", 1, save, [], [], [])
    assert flags.get_flag(aa, "--assistant-pass-log") == str(tmp_path / "aa-s1" / logs.PASS_LOG)
    base = flags.build_run_args(["--max-epoch", "2"], "baseline", 1, save, [], [], [])
    assert flags.get_flag(base, "--assistant-pass-log") is None
    older = flags.drop_flags(aa, {"--assistant-pass-log", "--save-dir"})
    assert flags.same_command(aa, older + ["--save-dir", "/elsewhere"])
    assert not flags.same_command(aa, older + ["--max-epoch", "3"])


def test_budget_tokens_become_baseline_updates():
    counts = np.array([[100, 120]] * 10)  # 10 batches of 100 tokens
    assert budgets.updates_for_tokens(counts, [1], 2500) == 25
    assert budgets.updates_for_tokens(counts, [2], 2500) == 12  # 200 tokens per update
    assert budgets.updates_for_tokens(counts, [1], 10) == 1


def test_language_pair_comes_from_the_data(tmp_path):
    for name in ("train.de-en.de.idx", "train.de-en.en.idx", "dict.de.txt", "dict.en.txt"):
        (tmp_path / name).write_text("")
    assert flags.data_langs(tmp_path, ["--source-lang", "de", "--target-lang", "en"],
                                []) == ("de", "en")
    assert flags.data_langs(tmp_path, ["-s", "en", "-t", "de"], []) == ("de", "en")
    assert flags.data_langs(tmp_path, ["--lr", "1"], ["-s", "en", "-t", "de"]) == ("en", "de")
    with pytest.raises(BenchmarkError, match="the config names fr->en .* point --data"):
        flags.data_langs(tmp_path, ["--source-lang", "fr", "--target-lang", "en"], [])
    with pytest.raises(BenchmarkError, match="--extra-args names fr->de"):
        flags.data_langs(tmp_path, [], ["-s", "fr", "-t", "de"])
    (tmp_path / "dict.en.txt").unlink()
    with pytest.raises(BenchmarkError, match=r"missing \['dict.en.txt'\]"):
        flags.data_langs(tmp_path, [], [])
    args = flags.build_run_args(["--source-lang", "fr", "--keep-last-epochs", "5",
                                     "--no-epoch-checkpoints", "--lr", "1"], "learnable", 1,
                                    tmp_path, [], [], ["--assistant-rule", "learnable"],
                                    langs=("de", "en"), keep_epochs=True)
    assert flags.get_flag(args, "--source-lang") == "de" and "fr" not in args
    assert "--keep-last-epochs" not in args and "--no-epoch-checkpoints" not in args
    assert flags.get_flag(args, "--task") == "autoassist_translation"
    assert flags.get_flag(args, "--assistant-rule") == "learnable"


def test_bad_command_lines_are_clear_errors(tiny_data, tmp_path):
    def bench(*args):
        return warm.run([*BENCH, "--data",
                         tiny_data, "--config", _tiny_config(tmp_path), "--out",
                         tmp_path / "o", *args], capture_output=True, text=True, cwd=REPO,
                        timeout=60)
    proc = bench("--arm", "bad name=--lr 1")
    assert proc.returncode == 2 and "expected NAME=" in proc.stderr
    proc = bench("--max-epoch", "1", "--arm", "random2=--lr 1")
    assert proc.returncode == 1 and "--arm random2: the name is taken" in proc.stderr
    proc = bench("--max-epoch", "1", "--noise-labels", tmp_path / "nope")
    assert proc.returncode == 1 and "nope not found" in proc.stderr
    proc = bench("--budget-tokens", "-5")
    assert proc.returncode == 1 and "must be > 0" in proc.stderr
    assert "example" in warm.run([*BENCH, "--help"], capture_output=True, text=True,
                                  cwd=REPO).stdout


def test_loss_at_tokens_interpolates_between_validations():
    curve = [{"boss_tokens": 100, "valid_loss": 6.0}, {"boss_tokens": 300, "valid_loss": 4.0}]
    assert metrics.value_at(curve, "boss_tokens", 200) == pytest.approx(5.0)
    assert metrics.value_at(curve, "boss_tokens", 300) == pytest.approx(4.0)
    assert metrics.value_at(curve, "boss_tokens", 50) is None
    assert metrics.value_at(curve, "boss_tokens", 301) is None


@pytest.mark.parametrize("source", ["generated", "data"])
def test_benchmark_assistant_measures_every_part(tiny_data, tmp_path, source):
    out = tmp_path / "assistant.json"
    cmd = [sys.executable, "-m", "research.benchmark_assistant", "--out", out]
    cmd += ["--pairs", "3000"] if source == "generated" else [
        "--data", tiny_data, "-s", "src", "-t", "tgt"]
    before = {p.name: p.stat().st_mtime_ns for p in Path(tiny_data).iterdir()}
    proc = warm.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # the data directory is left as it was (features are built in a temporary one)
    assert {p.name: p.stat().st_mtime_ns for p in Path(tiny_data).iterdir()} == before
    res = json.loads(out.read_text())
    assert res["pairs"] == (3000 if source == "generated" else 600)
    for key in ("feature_build_pairs_per_s", "scored_candidates_per_s",
                "learn_batches_per_s_128_pairs", "generator_batches_per_s_max_tokens_4096"):
        assert res[key] > 0, key
    assert res["second_process_mb"]["scored"]["Private"] < 50


def test_a_shorter_last_autoassist_epoch_counts_as_complete():
    lines = []
    for epoch, n in ((1, 120), (2, 100)):  # AutoAssist's second epoch has fewer batches
        end = 120 if epoch == 1 else 220
        lines += [f"x | INFO | train_inner | epoch {epoch:03d}:     50 / {n} loss=5, "
                  f"num_updates={end - n + 50}, wall=1",
                  f"x | INFO | train | epoch {epoch:03d} | loss 5 | aa_boss_tok {end * 10} | "
                  f"num_updates {end} | train_wall 4 | wall 5"]
    records = logs.parse_log(logs.HEADER + "cmd\n" + "\n".join(lines))
    assert logs.epochs_trained(records) == 2
    partial = records[:-1] + [dict(records[-1], num_updates=170)]  # stopped by --max-update
    assert logs.epochs_trained(partial) == 1.5


def test_sigterm_stops_the_training_it_started(tiny_data, tmp_path):
    proc = subprocess.Popen(
        [*BENCH, "--data", tiny_data, "--config",
         _tiny_config(tmp_path), "--out", tmp_path / "out", "--max-epoch", "200",
         "--skip-bleu"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO,
        start_new_session=True)
    log = tmp_path / "out" / "baseline-s1" / "train.log"
    deadline = time.monotonic() + 120
    while not (log.exists() and "| train_inner |" in log.read_text()):
        assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read()
        time.sleep(0.2)
    trainers = children(proc.pid)
    assert len(trainers) == 1
    os.kill(proc.pid, signal.SIGTERM)  # research.bench only, as a job scheduler would
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode != 0 and "stopped by signal" in out
    deadline = time.monotonic() + 10
    while running(trainers[0]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not running(trainers[0])


def test_benchmark_overhead_alternates_both_tasks(tiny_data, tmp_path):
    out, work = tmp_path / "overhead.json", tmp_path / "work"
    proc = warm.run(
        [sys.executable, "-m", "research.benchmark_overhead", "--data", tiny_data,
         "--config", _tiny_config(tmp_path), "--out", out, "--updates", "20", "--repeats", "2",
         "--work", work], capture_output=True, text=True, cwd=REPO, timeout=600,
        env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    res = json.loads(out.read_text())
    runs = res["runs"]
    assert [r["run"] for r in runs["translation"]] == ["translation-r0", "translation-r1"]
    for arm, rs in runs.items():
        for r in rs:
            assert r["updates"] == 20 and r["boss_tokens"] > 0 and r["boss_seconds"] > 0, arm
            assert r["seconds_per_mtok"] == pytest.approx(r["boss_seconds"] / r["boss_tokens"] * 1e6)
    log = (work / "autoassist_lambda0-r0" / "train.log").read_text()
    assert "--task autoassist_translation" in log and "--assistant-lambda-max 0" in log
    assert "--task translation" in (work / "translation-r1" / "train.log").read_text()
    # alternated: r0 ran translation first, r1 AutoAssist first
    mtime = lambda name: (work / name / "cpu.json").stat().st_mtime  # noqa: E731
    assert mtime("translation-r0") < mtime("autoassist_lambda0-r0")
    assert mtime("autoassist_lambda0-r1") < mtime("translation-r1")
    # nothing skipped, batches filled to the same --max-tokens: about the same Boss tokens
    base_tok, aa_tok = (runs[arm][0]["boss_tokens"] for arm in ("translation", "autoassist_lambda0"))
    assert abs(aa_tok / base_tok - 1) < 0.2
    assert res["ratio"] == pytest.approx(res["seconds_per_mtok"]["autoassist_lambda0"]
                                         / res["seconds_per_mtok"]["translation"])
    assert res["machine"]["processor"] and 0 <= res["other_cpu_share_max"] <= 1
    low, high = res["ratio_interval95"]  # around the paired ratios' geometric mean
    assert low < float(np.exp(np.log(res["ratio_per_repeat"]).mean())) < high
    bad = warm.run([sys.executable, "-m", "research.benchmark_overhead", "--data",
                    tiny_data, "--config", _tiny_config(tmp_path), "--out", out,
                    "--updates", "0"], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert bad.returncode == 1 and "--updates 0" in bad.stderr


def test_validations_spread_over_the_budget_at_log_lines():
    counts, freq = np.zeros((105, 2)), [1]  # 105 batches: 105 updates an epoch
    assert budgets.budget_updates(counts, freq, ["--max-epoch", "8"]) == 840
    assert budgets.budget_updates(counts, [2, 1], ["--max-epoch", "2"]) == 53 + 105
    assert budgets.budget_updates(counts, freq, ["--max-epoch", "8",
                                                   "--max-update", "300"]) == 300
    assert budgets.budget_updates(counts, freq, []) is None
    # 840 / 10 = 84, up to the next multiple of the log interval
    assert budgets.validation_flags(["--log-interval", "50"], 840, 10) == [
        "--validate-interval-updates", "100"]
    assert budgets.validation_flags([], 20000, 10) == ["--validate-interval-updates", "2000"]
    assert budgets.validation_flags(["--log-interval", "50"], 840, 0) == []
    assert budgets.validation_flags(["--validate-interval-updates", "0"], 840, 10) == []
    # with BLEU, a checkpoint at every one of those validations
    assert budgets.validation_flags(["--log-interval", "50"], 840, 10, checkpoints=True) == [
        "--validate-interval-updates", "100", "--save-interval-updates", "100"]
    assert budgets.validation_flags(["--save-interval-updates", "300"], 840, 10,
                                      checkpoints=True) == ["--validate-interval-updates", "100"]
    with pytest.raises(BenchmarkError, match="--validations -1"):
        cli.main(["--data", str(Path(__file__).parent), "--config",
                        "multi30k/transformer_small", "--out", "x", "--max-epoch", "1",
                        "--validations", "-1"])


def test_bleu_is_scored_at_mid_epoch_validation_checkpoints(tmp_path, monkeypatch):
    # a 250-update run: epoch 1 ends at update 120, validations every 100 updates
    curve = [{"epoch": 1, "updates": 100, "boss_tokens": 1000, "wall": 10.0},
             {"epoch": 1, "updates": 120, "boss_tokens": 1200, "wall": 12.0},
             {"epoch": 2, "updates": 200, "boss_tokens": 2000, "wall": 20.0},
             {"epoch": 3, "updates": 250, "boss_tokens": 2500, "wall": 25.0}]
    for name in ("checkpoint_1_100.pt", "checkpoint1.pt", "checkpoint_2_200.pt",
                 "checkpoint_last.pt", "checkpoint_best.pt", "checkpoint_2_150.pt"):
        (tmp_path / name).write_bytes(b"")
    scored = []
    monkeypatch.setattr(runs, "run_bleu", lambda data, ckpt_dir, checkpoint: (
        scored.append(checkpoint) or float(len(scored))))
    points = runs.bleu_curve("data", tmp_path, curve)
    # checkpoint_2_150.pt has no validation point (a stale file): not scored
    assert scored == ["checkpoint_1_100.pt", "checkpoint1.pt", "checkpoint_2_200.pt",
                      "checkpoint_last.pt"]
    assert [(p["updates"], p["boss_tokens"], p["bleu"]) for p in points] == [
        (100, 1000, 1.0), (120, 1200, 2.0), (200, 2000, 3.0), (250, 2500, 4.0)]


def _wait_ended(pid, seconds=60.0):
    """Whether *pid* ends within *seconds* (a hang guard: it ends in milliseconds)."""
    deadline = time.monotonic() + seconds
    while running(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not running(pid)


@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux's")
def test_training_child_ends_when_its_driver_is_killed_outright():
    """The fairseq-train child of a driver killed by SIGKILL (no handler runs) gets SIGTERM
    from the kernel, so a rerun never resumes into a folder another training still writes."""
    child = None
    sleeper = runs.DIE_WITH_PARENT + "print('asked', flush=True); import time; time.sleep(60)"
    driver = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys, time; p = subprocess.Popen("
         f"[sys.executable, '-c', {sleeper!r}]); print(p.pid, flush=True); "
         "time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    try:
        lines = [driver.stdout.readline().strip() for _ in range(2)]  # in either order
        child = int(next(line for line in lines if line != "asked"))
        assert "asked" in lines and running(child)  # the child has asked for the signal
        driver.kill()
        driver.wait()
        assert _wait_ended(child), "the training child outlived its killed driver"
    finally:
        if driver.poll() is None:
            driver.kill()
        if child is not None and running(child):
            os.kill(child, signal.SIGKILL)


def test_run_process_group_ends_a_scripts_children_on_an_exception(tmp_path):
    """evaluate.sh's fairseq-generate is bash's child: an interrupted BLEU step (Ctrl-C, or
    SIGTERM turned into SystemExit) ends the whole group, not bash alone."""
    import threading

    pid_file = tmp_path / "grandchild.pid"
    script = f"sleep 60 & echo $! > {pid_file}.tmp; mv {pid_file}.tmp {pid_file}; wait"

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    def interrupt_once_started():  # Ctrl-C once bash has started its child
        deadline = time.monotonic() + 60  # a hang guard
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGALRM)  # handled in the main thread, inside the step

    old = signal.signal(signal.SIGALRM, interrupt)
    threading.Thread(target=interrupt_once_started, daemon=True).start()
    try:
        with pytest.raises(KeyboardInterrupt):
            runs.run_process_group(["bash", "-c", script], grace=5)
    finally:
        signal.signal(signal.SIGALRM, old)
    grandchild = int(pid_file.read_text())
    try:
        assert _wait_ended(grandchild), "bash's child outlived the interrupted step"
    finally:
        if running(grandchild):
            os.kill(grandchild, signal.SIGKILL)
    done = runs.run_process_group(["bash", "-c", "echo out; echo err >&2; exit 3"])
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")
