"""research/gpu/check.sh --cpu-dry-run: the GPU check's script runs on CPU between GPU runs.

The whole dry run starts about ten fairseq trainings (minutes on 2 cores); the suite runs
the steps that exercise the check's own machinery (environment, a training run read back
from its log and trace, the CUDA-only skips, a killed Assistant). The benchmark steps run
with `bash research/gpu/check.sh --cpu-dry-run` (docs/gpu.md).

The scripts' own Python commands (`$PYTHON -c ...`, `$PYTHON -m research...`) start warm
(:func:`warm_python`); the trainings they start run the venv's fairseq-train by its path,
cold, so the kill step reads and signals a real fairseq-train and its Assistant.
"""

import json
import os
import subprocess
import sys

import warm_shims
from utils import REPO

STEPS = "env,train_fp32,train_fp16,train_amp,spawn,kill_error"


def warm_python():
    """The environment for research/gpu's scripts with PYTHON=python, a shim first on PATH
    (tests/warm_shims.py): each `$PYTHON ...` of theirs is forked from a warm server instead
    of a new interpreter's ~6 s of imports; the scripts resolve and use it as any python."""
    return dict(warm_shims.environment(dict(os.environ), names=("python",)), PYTHON="python")


def test_cpu_dry_run_writes_a_passing_summary(synthetic_data, tmp_path):
    """On the session's prepared synthetic corpus (--data; the check's own generated one is
    prepared by the same scripts/prepare-corpus.sh)."""
    out = tmp_path / "out"
    env = warm_python()
    proc = subprocess.run(
        ["bash", str(REPO / "research/gpu/check.sh"), "--cpu-dry-run", "--no-install",
         "--steps", STEPS, "--work", str(tmp_path / "work"), "--out", str(out),
         "--data", str(synthetic_data)],
        capture_output=True, text=True, timeout=600, env=env, cwd=REPO)
    summary_path = out / "gpu-check.json"
    assert summary_path.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads(summary_path.read_text())
    steps = summary["steps"]
    assert proc.returncode == 0 and summary["passed"], json.dumps(steps, indent=1)
    assert summary["mode"] == "cpu-dry-run" and list(steps) == STEPS.split(",")
    assert "synthetic pairs" not in proc.stdout  # --data: no corpus generated
    assert steps["env"]["figures"]["fairseq"] and steps["env"]["figures"]["torch"]
    train = steps["train_fp32"]
    assert train["status"] == "PASS"
    # skipping read back from the trace: a whole pass with fewer pairs than the corpus
    fig = train["figures"]
    assert min(fig["pairs_per_pass"]) < fig["corpus_pairs"] and fig["aa_skip_tok"] > 0
    # read from the run's last train_inner record, a fairseq JSON line as research's runs log
    assert fig["updates"] == 40 and fig["loss"] > 0 and fig["aa_boss_tok"] > 0
    assert '| train_inner | {"epoch": ' in (out / "gpu-check.log").read_text()
    for name in ("train_fp16", "train_amp", "spawn"):  # CUDA-only: skipped with a reason
        assert steps[name]["status"] == "SKIP" and steps[name]["reason"]
    assert steps["kill_error"]["status"] == "PASS"
    assert steps["kill_error"]["figures"]["exit"] != 0 and not steps["kill_error"]["figures"]["left"]
    # one PASS/FAIL/SKIP line per step on the console
    assert sum(line.startswith("[check] ") and line.split()[1] in ("PASS", "FAIL", "SKIP")
               for line in proc.stdout.splitlines()) == len(steps)



def test_data_without_a_prepared_corpus_stops_at_once(tmp_path):
    """--data names a folder that prepare-corpus.sh did not write: the reason and the fix,
    before any environment or corpus work."""
    proc = subprocess.run(
        ["bash", str(REPO / "research/gpu/check.sh"), "--cpu-dry-run", "--no-install",
         "--data", str(tmp_path), "--work", str(tmp_path / "work"), "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=30, cwd=REPO)
    assert proc.returncode == 1
    assert f"--data {tmp_path} holds no corpus prepared by scripts/prepare-corpus.sh" in proc.stderr
    assert "no train.kept-lines" in proc.stderr and "[check] corpus" not in proc.stdout

# What the H100 printed (docs/results/gpu/): the error raised, then a C++ terminate at exit.
KILLED_ERROR_OUT = ("autoassist_fairseq.transport.process.AssistantDied: the Assistant process "
                    "died: it was killed by SIGKILL (the OOM killer?) without a traceback\n"
                    "terminate called without an active exception\n")
UNIFORM_OUT = ("WARNING | the Assistant process died: it was killed by SIGKILL\n"
               "--assistant-fallback uniform: continuing this run on uniform batches\n"
               "| fairseq_cli.train | done training in 19.1 seconds\n")


def test_kill_verdict_fails_a_run_that_ends_by_a_signal():
    sys.path.insert(0, str(REPO))
    from research.gpu.check_runs import kill_verdict

    assert kill_verdict("error", 1, KILLED_ERROR_OUT, 1.1, []) == ("PASS", "")
    status, reason = kill_verdict("error", -6, KILLED_ERROR_OUT, 1.1, [])
    assert status == "FAIL" and "signal 6 (SIGABRT)" in reason
    assert kill_verdict("error", 1, KILLED_ERROR_OUT, 12.0, [])[0] == "FAIL"
    assert kill_verdict("error", 1, "Traceback: ValueError\n", 1.0, [])[0] == "FAIL"
    assert kill_verdict("uniform", 0, UNIFORM_OUT, 18.0, []) == ("PASS", "")
    status, reason = kill_verdict("uniform", -6, UNIFORM_OUT, 18.0, [])
    assert status == "FAIL" and "trained to its end" in reason and "SIGABRT" in reason
    assert kill_verdict("uniform", 0, UNIFORM_OUT.replace("done training", ""), 9, [])[0] \
        == "FAIL"
    assert kill_verdict("uniform", 0, UNIFORM_OUT, 18.0, [1234])[0] == "FAIL"


def test_fixed_budget_on_a_gpu_runs_each_arm_without_cpu(tiny_data, tmp_path):
    """research/gpu/fixed_budget.sh: one research.fixed_budget process per item, the config's
    --cpu and the tools' own dropped, an item's arms one after the other, all packed; the
    --runs-tgz folders unpacked where the arms look for them."""
    import tarfile

    tgz = tmp_path / "data.tgz"
    with tarfile.open(tgz, "w:gz") as tar:
        for path in tiny_data.iterdir():
            tar.add(path, arcname=path.name)
    made = tmp_path / "made" / "filtered-data"
    made.mkdir(parents=True)
    (made / "done").write_text("3 of 40 pairs flagged\n")
    runs_tgz = tmp_path / "runs.tgz"
    with tarfile.open(runs_tgz, "w:gz") as tar:
        tar.add(made, arcname="filtered-data")
    out, work = tmp_path / "out", tmp_path / "work"
    proc = subprocess.run(
        ["bash", "research/gpu/fixed_budget.sh", "--no-install", "--data-tgz", str(tgz),
         "--runs-tgz", str(runs_tgz), "--corpus", "tiny", "--budget-updates", "20",
         "--config", "demo/transformer_tiny",
         "--arms", "plain@1.0,default@0.5+random@0.5,plain@0.5/linear", "--seed", "2",
         "--work", str(work),
         "--out", str(out),
         "--deadline", "200", "--", "--dry-run"],
        cwd=REPO, capture_output=True, text=True, timeout=300, env=warm_python())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with tarfile.open(out / "runs.tgz") as tar:
        logs = {m.name: tar.extractfile(m).read().decode() for m in tar.getmembers()
                if m.name.startswith("console/arms-")}
    assert sorted(logs) == [f"console/arms-{item}-s2.log" for item in
                            ("default_0.5_random_0.5", "plain_0.5_linear", "plain_1.0")]
    plain = logs["console/arms-plain_1.0-s2.log"]
    both = logs["console/arms-default_0.5_random_0.5-s2.log"]
    commands = [line for text in logs.values() for line in text.splitlines()
                if line.startswith(("plain-", "default-", "random-"))]
    assert sorted(c.split(":")[0] for c in commands if c.startswith("plain-")) == \
        ["plain-0.50B-s2-linear", "plain-1.00B-s2-rex"]
    assert both.index("default-0.50B-s2-rex:") < both.index("random-0.50B-s2-rex:")
    assert len(commands) == 4 and not any("--cpu" in c.split() for c in commands), commands
    assert "--max-update 20" in plain and "--lr-scheduler rex" in plain  # the default
    # ARM@SHARE/SCHEDULE: that item's run alone with the schedule
    linear = logs["console/arms-plain_0.5_linear-s2.log"]
    assert "plain-0.50B-s2-linear:" in linear and "--lr-scheduler polynomial_decay" in linear
    assert (work / "runs" / "tiny" / "filtered-data" / "done").read_text() == \
        "3 of 40 pairs flagged\n"


def test_cpp_traces_print_every_thread_on_an_abort():
    """--cpp-traces: a run that aborts prints the C++ stack of each of its threads."""
    code = ("import os, signal, threading, time\n"
            "threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
            "os.kill(os.getpid(), signal.SIGABRT)\n")
    env = dict(os.environ, PYTHONPATH=str(REPO / "research" / "gpu" / "fatal_traces"),
               PYTHONFAULTHANDLER="1")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == -6
    assert proc.stderr.count("SIGABRT(6), PID:") >= 2, proc.stderr[-2000:]  # both threads
    assert "Fatal Python error: Aborted" in proc.stderr  # faulthandler's Python view
