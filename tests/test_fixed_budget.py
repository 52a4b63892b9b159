"""research/fixed_budget.py and fixed_budget_report.py: the arms' flags (a schedule that
decays to zero at each arm's own budget), the summary merge, the matching budget share,
the converged budget, and a resumable run of three arms on a tiny corpus."""

import json
import os
import re
import sys

import pytest

import warm
from utils import REPO, TINY_TRANSFORMER

from research import fixed_budget, merge_run, run_reuse
from research import fixed_budget_report as report
from research.bench import BenchmarkError
from research.bench.flags import get_flag
from research.bench.logs import (HEADER, PASS_LOG, epochs_trained, parse_log, random_rates,
                                 read_passes)

CONFIG = TINY_TRANSFORMER + [
    "--optimizer", "adam", "--lr", "0.005", "--lr-scheduler", "inverse_sqrt",
    "--warmup-updates", "4", "--warmup-init-lr", "1e-07", "--criterion",
    "label_smoothed_cross_entropy", "--label-smoothing", "0.1", "--max-tokens", "600",
    "--max-epoch", "3", "--num-workers", "0", "--keep-last-epochs", "2"]


def _ctx(tmp_path, sync=True):
    return {"tokens": CONFIG, "extra": [], "langs": ("src", "tgt"), "work": tmp_path,
            "B": 100, "budget_epochs": 3, "sync": sync, "rules": {"default": []},
            "assistant_extra": ["--assistant-window", "256"], "schedule": "cosine"}


def test_every_arm_decays_its_learning_rate_to_zero_at_its_own_budget(tiny_data, tmp_path):
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq.optim import build_optimizer
    from fairseq.optim.lr_scheduler import build_lr_scheduler
    import torch

    ctx = _ctx(tmp_path)
    for arm, share, kind in (("plain", 0.7, "translation"), ("default", 0.55,
                                                             "autoassist_translation"),
                             ("random", 0.7, "autoassist_translation")):
        args = fixed_budget.arm_args(arm, share, 1, ctx, "1.0,0.8")
        assert get_flag(args, "--task") == kind
        assert get_flag(args, "--max-update") == str(round(100 * share))
        assert get_flag(args, "--max-epoch") is None
        assert args.count("--lr-scheduler") == 1
        assert (get_flag(args, "--warmup-updates"), get_flag(args, "--lr"),
                get_flag(args, "--warmup-init-lr")) == ("4", "0.005", "1e-07")
        assert ("--assistant-sync" in args) == (arm != "plain"), arm
        assert ("--assistant-window" in args) == (arm != "plain"), arm
        assert str(tmp_path / fixed_budget.run_name(arm, share, 1)) in " ".join(args)
    # fairseq's own scheduler under plain's flags (the other arms' schedule flags are the
    # same): peak --lr after the warm-up, about 0 at the end of the arm's budget
    schedule = ("--lr-scheduler", "--lr", "--min-lr", "--warmup-updates", "--warmup-init-lr")
    flags = {arm: run_reuse.flag_values(fixed_budget.arm_args(arm, 0.7, 1, ctx, "0.9"))
             for arm in ("plain", "default", "random")}
    for arm in ("default", "random"):
        assert [flags[arm][f] for f in schedule] == [flags["plain"][f] for f in schedule]
    cfg = convert_namespace_to_omegaconf(options.parse_args_and_arch(
        options.get_training_parser(), [str(tiny_data)] + fixed_budget.arm_args("plain", 0.7,
                                                                                1, ctx)))
    optimizer = build_optimizer(cfg.optimizer, [torch.nn.Parameter(torch.zeros(1))])
    scheduler = build_lr_scheduler(cfg.lr_scheduler, optimizer)
    assert scheduler.step_update(4) == pytest.approx(0.005)
    assert scheduler.step_update(35) < 0.005
    # the trainer sets the lr of update n + 1 after update n: the last update (number 70)
    # trains at the value set after update 69, the end of the half cosine
    assert 0 < scheduler.step_update(69) < 1e-3 * 0.005
    assert "--assistant-sync" not in fixed_budget.arm_args("default", 0.7, 1, _ctx(tmp_path,
                                                                                  False))
    assert "--assistant-random-rates" in fixed_budget.arm_args("random", 0.7, 1, ctx, "0.9")
    inverse = fixed_budget.arm_args("plain-inverse-sqrt", 1.0, 1, ctx)
    assert get_flag(inverse, "--lr-scheduler") == "inverse_sqrt"
    assert get_flag(inverse, "--max-epoch") == "3"
    assert "--keep-last-epochs" not in inverse  # every epoch kept, as the long baseline's


def test_a_long_run_of_another_session_is_reused_only_for_the_same_command(tmp_path):
    args = ["--task", "translation", "--max-epoch", "3", "--seed", "1", "--save-dir", "/a"]
    run = tmp_path / "long"
    (run / "checkpoints").mkdir(parents=True)
    header = HEADER + "python -m fairseq_cli.train /data " + " ".join(
        args[:-1]) + " /b/checkpoints\n"
    (run / "train.log").write_text(header + "epoch 001 | ...\n")
    assert run_reuse.reusable_run(run, "/data", args) is False  # still training
    (run / "train.log").write_text(header + "done training in 9.0 seconds\n")
    (run / "checkpoints" / "checkpoint_last.pt").write_bytes(b"")
    assert run_reuse.reusable_run(run, "/data", args) is True
    with pytest.raises(BenchmarkError, match="trained another command"):
        run_reuse.reusable_run(run, "/other-data", args)
    with pytest.raises(BenchmarkError, match="trained another command"):
        run_reuse.reusable_run(run, "/data", args[:3] + ["4"] + args[4:])
    # a run logged in fairseq's simple format trained what the same command in JSON trains
    (run / "train.log").write_text(header.replace(" --seed", " --log-format simple --seed")
                                   + "done training in 9.0 seconds\n")
    assert run_reuse.reusable_run(run, "/data", args + ["--log-format", "json"]) is True
    with pytest.raises(BenchmarkError, match="trained another command"):
        run_reuse.reusable_run(run, "/data", args + ["--log-interval", "5"])
    # a run started by fairseq-train itself: the configuration it logged
    (run / "train.log").write_text(
        "2026 | INFO | fairseq_cli.train | {'_name': None, 'model': Namespace(data='/data', "
        "max_epoch=3, lr=[0.002], seed=1, task='translation', save_dir='/b')}\n"
        "done training in 9.0 seconds\n")
    assert run_reuse.reusable_run(run, "/data", args + ["--lr", "0.002"]) is True
    with pytest.raises(BenchmarkError, match=r"--max-epoch 4 \(logged: 3\)"):
        run_reuse.reusable_run(run, "/data", args[:3] + ["4"] + args[4:])


def test_arms_list_keeps_its_order_and_rejects_unknown_arms():
    assert fixed_budget.parse_arms("plain@1.0,default@0.7")[:2] == [("plain", 1.0),
                                                                    ("default", 0.7)]
    rules = fixed_budget.parse_arms("plain@1.0", ["reducible"])
    assert rules == [("plain", 1.0)] + [("reducible", s) for s in fixed_budget.RULE_SHARES]
    assert fixed_budget.parse_arms("plain@1.0", ["reducible"], listed_only=True) == \
        [("plain", 1.0)]
    assert fixed_budget.parse_arms("reducible@0.7", ["reducible"], listed_only=True) == \
        [("reducible", 0.7)]
    for bad in ("plain", "foo@0.7", "default@0", "default@x"):
        with pytest.raises(BenchmarkError, match="expected ARM@SHARE"):
            fixed_budget.parse_arms(bad)


def entry(arm, share, loss, bleu, seed=1, corpus="multi30k"):
    return {"corpus": corpus, "seed": seed, "arm": arm, "budget_share": share,
            "valid_loss": loss, "valid_reducible_loss": loss - 1.8, "bleu": bleu,
            "boss_tokens": int(share * 1e6)}


def test_summary_merge_replaces_the_same_run_and_keeps_the_others(tmp_path):
    path = tmp_path / "converged" / "summary.json"
    report.merge_summary(path, [entry("plain", 1.0, 4.0, 37.0), entry("default", 0.7, 4.1, 36)])
    rows = report.merge_summary(path, [entry("default", 0.7, 3.9, 37.5),
                                       entry("plain", 1.0, 4.2, 35.0, corpus="tatoeba")])
    assert rows == json.loads(path.read_text())
    assert len(rows) == 3
    assert [r["valid_loss"] for r in rows if r["arm"] == "default"] == [3.9]
    with pytest.raises(ValueError, match="lacks"):
        report.merge_summary(path, [{"corpus": "multi30k", "seed": 1}])


def test_matching_share_is_the_smallest_share_within_loss_and_bleu_margin():
    rows = [entry("plain", 1.0, 4.00, 37.0), entry("plain", 0.7, 4.05, 36.9),
            entry("default", 0.55, 4.01, 37.0), entry("default", 0.7, 3.99, 36.75),
            entry("default", 0.85, 3.95, 37.2), entry("random", 0.7, 3.99, 36.6),
            entry("plain", 1.0, 4.5, 30.0, seed=2), entry("default", 0.7, 4.4, None, seed=2)]
    shares = report.matching_shares(rows)
    assert shares[("multi30k", 1, "default")] == 0.7  # 0.55: loss 0.01 higher
    assert shares[("multi30k", 1, "plain")] == 1.0  # 0.7: loss higher; B matches itself
    assert shares[("multi30k", 1, "random")] is None  # BLEU 0.4 below
    assert shares[("multi30k", 2, "default")] is None  # no BLEU: not a match
    table = report.summary_table(rows)
    assert "| multi30k | 1 | default | 0.55 |" in table and "0.70 B |" in table
    random_row = [line for line in table.splitlines() if "| random |" in line][0]
    assert random_row.endswith("| no measured share |")
    plain_rows = [line for line in table.splitlines() if "| 1 | plain |" in line]
    assert {row.split("|")[4].strip(): row.rsplit("|", 2)[1].strip() for row in plain_rows} \
        == {"0.70": "1.00 B", "1.00": "(target)"}


def test_converged_budget_from_the_last_fifth_improvement(tmp_path):
    # loss 10 / sqrt(epoch) until epoch 8, flat at epoch 10 after a dip at 6 (100 updates each)
    losses = {1: 10, 2: 7, 3: 6, 4: 5.5, 5: 5.2, 6: 5.0, 7: 4.9, 8: 4.88, 9: 4.87, 10: 4.865}
    curve = [{"epoch": e, "updates": 100 * e, "valid_loss": v} for e, v in losses.items()]
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"curves": {"baseline-s1": curve}}))
    rows = report.last_fifth_improvements(report.read_curve(results))
    assert rows[0][3] is None  # 80 updates: before the first validation
    assert rows[4][3] == pytest.approx((5.5 - 5.2) / 5.5)  # 0.8 * 500 = 400
    first, lasting = report.converged_budget(rows, 0.01)
    assert (first[0], lasting[0]) == (9, 9)
    assert report.converged_budget(rows, 0.001) == (None, None)
    with pytest.raises(BenchmarkError, match="no curve 'x'"):
        report.read_curve(results, "x")


def test_a_run_trained_elsewhere_merges_under_another_name(tmp_path):
    source, target = tmp_path / "elsewhere", tmp_path / "converged"
    source.mkdir()
    curve = [{"epoch": e, "updates": 10 * e, "boss_tokens": 1000 * e, "valid_loss": 6.0 - e}
             for e in (1, 2)]
    run = {"entry": entry("plain", 0.7, 4.2, 35.0, corpus="noisy-checked"), "args": ["--x"],
           "curve": curve}
    (source / "runs-noisy-checked.json").write_text(json.dumps({"plain-0.70B-s1": run}))
    report.merge_summary(target / "summary.json",
                         [entry("plain", 1.0, 4.0, 37.0, corpus="noisy")])
    merged = merge_run.merge_run(source, "noisy-checked", "plain-0.70B-s1", target,
                                 as_corpus="noisy", as_arm="plain-checked")
    assert (merged["corpus"], merged["arm"], merged["budget_share"]) == \
        ("noisy", "plain-checked", 0.7)
    rows = json.loads((target / "summary.json").read_text())
    assert {(r["corpus"], r["arm"]) for r in rows} == {("noisy", "plain"),
                                                        ("noisy", "plain-checked")}
    runs = json.loads((target / "runs-noisy.json").read_text())
    assert list(runs) == ["plain-checked-0.70B-s1"]
    assert runs["plain-checked-0.70B-s1"]["curve"] == curve
    assert "| noisy | 1 | plain-checked | 0.70 |" in (target / "README.md").read_text()
    assert (target / "curves-noisy.png").stat().st_size > 0
    with pytest.raises(BenchmarkError,
                       match=r"no run 'default-0.85B-s1' \(it has \['plain-0.70B-s1'\]\)"):
        merge_run.merge_run(source, "noisy-checked", "default-0.85B-s1", target)
    # a run whose key does not start with its arm cannot be renamed by arm
    (source / "runs-odd.json").write_text(json.dumps({"odd-run": run}))
    with pytest.raises(BenchmarkError, match="not named after its arm 'plain'"):
        merge_run.merge_run(source, "odd", "odd-run", target, as_arm="plain-checked")


def test_a_benchmark_baseline_enters_as_the_inverse_sqrt_arm(tmp_path):
    """scripts/benchmark.py's plain baseline becomes plain-inverse-sqrt: its last validation,
    its share of plain fairseq at B's updates, and the reducible loss by that run's floor;
    without plain fairseq at B in the target, an error says to merge it first."""
    target = tmp_path / "converged"
    curve = [{"epoch": e, "updates": 130 * e, "boss_tokens": 1000 * e, "valid_loss": 6.0 - e,
              "wall": 60.0 * e} for e in (1, 2, 3)]
    bench = tmp_path / "results.json"
    bench.write_text(json.dumps({"curves": {"baseline-s1": curve, "autoassist-s1": curve},
                                 "per_seed": [{"seed": 1, "bleu_baseline": 36.5,
                                               "other_cpu_share_baseline": 0.01}],
                                 "command": ["scripts/benchmark.py", "--seed", "1"]}))
    with pytest.raises(BenchmarkError, match="no plain fairseq at B of multi30k, seed 1"):
        merge_run.bench_baseline(bench, "multi30k", "baseline-s1", target)
    plain = dict(entry("plain", 1.0, 3.1, 37.0, corpus="multi30k"), updates=360,
                 valid_reducible_loss=1.3)
    report.merge_summary(target / "summary.json", [plain])
    got = merge_run.bench_baseline(bench, "multi30k", "baseline-s1", target)
    assert (got["arm"], got["budget_share"], got["valid_loss"], got["bleu"]) == \
        ("plain-inverse-sqrt", round(390 / 360, 4), 3.0, 36.5)
    assert got["valid_reducible_loss"] == pytest.approx(3.0 - (3.1 - 1.3))
    assert got["boss_tokens"] == 3000
    rows = json.loads((target / "summary.json").read_text())
    assert [r["arm"] for r in rows] == ["plain", "plain-inverse-sqrt"]
    assert "| multi30k | 1 | plain-inverse-sqrt | 1.08 |" in (target / "README.md").read_text()
    with pytest.raises(BenchmarkError, match="no baseline run 'autoassist-s1'"):
        merge_run.bench_baseline(bench, "multi30k", "autoassist-s1", target)
    # research.bench's results.json: a seed's figures per arm
    bench.write_text(json.dumps({"curves": {"baseline-s1": curve, "baseline-s2": curve},
                                 "per_seed": [{"seed": 1, "arms": {"baseline": {
                                     "final_bleu": 36.9, "other_cpu_share": 0.2}}}],
                                 "command": ["-m", "research.bench"]}))
    got = merge_run.bench_baseline(bench, "multi30k", "baseline-s1", target)
    assert (got["bleu"], got["other_cpu_share"]) == (36.9, 0.2)
    with pytest.raises(BenchmarkError, match="no per-seed figures of seed 2"):
        merge_run.bench_baseline(bench, "multi30k", "baseline-s2", target)


def test_readme_table_is_rewritten_between_its_markers_only(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# Converged\n\n## Oracle curve\n\nkept text\n")
    report.write_table(readme, [entry("plain", 1.0, 4.0, 37.0)])
    report.write_table(readme, [entry("plain", 1.0, 4.0, 37.0), entry("plain", 0.7, 4.1, 36)])
    text = readme.read_text()
    assert text.count(report.TABLE_START) == 1 and "kept text" in text
    assert "| multi30k | 1 | plain | 0.70 |" in text


def test_tiny_fixed_budget_runs_are_reused_and_fill_the_summary(tiny_data, tmp_path):
    config = tmp_path / "tiny.args"
    config.write_text(" ".join(CONFIG) + "\n")
    cmd = [sys.executable, "-m", "research.fixed_budget", "--data", tiny_data,
           "--config", config, "--corpus", "multi30k", "--work", tmp_path / "work",
           "--budget-updates", "12", "--arms", "default@0.5,random@0.5,plain-checked@0.5",
           "--skip-bleu", "--results", tmp_path / "results",
           "--extra-args", "--log-interval 2", "--assistant-args", "--assistant-window 256"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = warm.run(cmd, capture_output=True, text=True, timeout=400, env=env,
                    cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = json.loads((tmp_path / "results" / "summary.json").read_text())
    assert {(r["arm"], r["budget_share"]) for r in rows} == {
        ("default", 0.5), ("random", 0.5), ("plain-checked", 0.5)}
    for r in rows:
        assert r["valid_reducible_loss"] < r["valid_loss"] and r["boss_tokens"] > 0
        assert r["updates"] == round(12 * r["budget_share"])
    work = tmp_path / "work" / "multi30k"
    # without --schedule every arm trains with REX, its run folder named so
    assert {r["schedule"] for r in rows} == {"rex"}
    default_log = (work / "default-0.50B-s1-rex" / "train.log").read_text()
    assert "--assistant-sync" in default_log.split("\n", 1)[0]  # deterministic mode
    assert "--lr-scheduler rex" in default_log.split("\n", 1)[0]
    # the run's records are fairseq's JSON lines: a train_inner line every 2 updates
    records = parse_log(default_log)
    assert "| train_inner | {" in default_log and "| train_inner | epoch" not in default_log
    inner = [r for r in records if r["tag"] == "train_inner"]
    assert [(r["epoch"], r["num_updates"]) for r in inner] == [(1, 2), (1, 4), (1, 6)]
    # epoch_updates, from fairseq's fractional "update": the size its GroupedIterator logs
    size = int(re.search(r"grouped total_num_itrs = (\d+)", default_log).group(1))
    assert [r["epoch_updates"] for r in inner] == [size] * 3
    assert [r["update"] for r in inner] == [round(n / size, 3) for n in (2, 4, 6)]
    assert epochs_trained(records) == 6 / size < 1
    passes = read_passes(work / "default-0.50B-s1-rex" / PASS_LOG)
    rates = random_rates([], "", passes)
    assert passes and rates == random_rates(parse_log(default_log), default_log)
    assert f"--assistant-random-rates {rates}" in (work / "random-0.50B-s1-rex" /
                                                   "train.log").read_text()
    assert "Fixed-budget comparisons" in (tmp_path / "results" / "README.md").read_text()
    assert (tmp_path / "results" / "curves-multi30k.png").stat().st_size > 0
    # plain-checked: plain fairseq on the pairs the checks do not flag, written once
    from autoassist_fairseq.features.store import FeatureStore
    flagged = int(FeatureStore.open(str(tiny_data / "train.src-tgt.autoassist")).suspect_pairs().sum())
    assert flagged > 0
    filtered = work / "filtered-data"
    assert (filtered / "done").read_text().startswith(f"{flagged} of ")
    filtered_log = (work / "plain-checked-0.50B-s1-rex" / "train.log").read_text()
    assert "--task translation" in filtered_log and str(filtered) in filtered_log
    # rerunning the command reuses every finished run, one logged in the simple format too
    old_log = work / "default-0.50B-s1-rex" / "train.log"
    old_log.write_text(default_log.replace("--log-format json", "--log-format simple", 1))
    proc = warm.run(cmd, capture_output=True, text=True, timeout=200, env=env,
                    cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stdout.count("finished before: reusing") == 3, proc.stdout
    assert json.loads((tmp_path / "results" / "summary.json").read_text()) == rows


def test_schedule_report_compares_each_schedule_with_cosine_and_the_target(tmp_path, capsys):
    from research import schedule_report

    def row(arm, share, schedule, seed, loss, bleu):
        return {"corpus": "c", "seed": seed, "arm": arm, "budget_share": share,
                "schedule": schedule, "valid_loss": loss, "valid_reducible_loss": loss - 1,
                "bleu": bleu, "boss_tokens": 1}
    rows = [row("plain", 1.0, "cosine", 1, 4.20, 38.0), row("plain", 1.0, "cosine", 2, 4.30, 37.0),
            row("plain", 0.7, "cosine", 1, 4.30, 36.0), row("plain", 0.7, "cosine", 2, 4.40, 35.0),
            row("plain", 0.7, "rex", 1, 4.19, 37.8), row("plain", 0.7, "rex", 2, 4.36, 36.0),
            row("default", 0.7, "rex", 1, 4.21, 38.3)]
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps(rows))
    schedule_report.main([str(summary)])
    out = capsys.readouterr().out
    # REX at 0.7 B: 0.075 lower than cosine on the mean of the two seeds, 1.4 BLEU above;
    # seed 1 matches plain at B with cosine, seed 2 misses it by 1 BLEU
    assert "| 0.70 | rex | 4.190 / 4.360 | 37.80 / 36.00 | 4.275, 36.90 | -0.075, +1.40 | " \
           "yes (-0.010, -0.20) / no (+0.060, -1.00) |" in out
    assert "| 1.00 | cosine | 4.200 / 4.300 | 38.00 / 37.00 | 4.250, 37.50 |  | target / target |" in out
    # the Assistant arm against plain fairseq at its share with its schedule (seed 1 only)
    assert "| default | 0.70 | rex | 4.210 | 38.30 | +0.020, +0.50 |" in out
    summary.write_text(json.dumps([r for r in rows if r["arm"] != "default"]))
    schedule_report.main([str(summary), "--corpus", "c"])
    assert "| default |" not in capsys.readouterr().out
    with pytest.raises(BenchmarkError, match="no rows with a test BLEU of corpus other"):
        schedule_report.main([str(summary), "--corpus", "other"])
