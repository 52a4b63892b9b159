"""research/gpu/check.sh --cpu-dry-run: the GPU check's script runs on CPU between GPU runs.

The whole dry run starts about ten fairseq trainings (minutes on 2 cores); the suite runs
the steps that exercise the check's own machinery (environment, a training run read back
from its log and trace, the CUDA-only skips, a killed Assistant). The benchmark steps run
with `bash research/gpu/check.sh --cpu-dry-run` (docs/gpu.md).
"""

import json
import os
import subprocess
import sys

from utils import REPO

STEPS = "env,train_fp32,train_fp16,train_amp,spawn,kill_error"


def test_cpu_dry_run_writes_a_passing_summary(tmp_path):
    out = tmp_path / "out"
    env = dict(os.environ, PYTHON=sys.executable)
    proc = subprocess.run(
        ["bash", str(REPO / "research/gpu/check.sh"), "--cpu-dry-run", "--no-install",
         "--steps", STEPS, "--work", str(tmp_path / "work"), "--out", str(out)],
        capture_output=True, text=True, timeout=600, env=env, cwd=REPO)
    summary_path = out / "gpu-check.json"
    assert summary_path.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads(summary_path.read_text())
    steps = summary["steps"]
    assert proc.returncode == 0 and summary["passed"], json.dumps(steps, indent=1)
    assert summary["mode"] == "cpu-dry-run" and list(steps) == STEPS.split(",")
    assert steps["env"]["figures"]["fairseq"] and steps["env"]["figures"]["torch"]
    train = steps["train_fp32"]
    assert train["status"] == "PASS"
    # skipping read back from the trace: a whole pass with fewer pairs than the corpus
    fig = train["figures"]
    assert min(fig["pairs_per_pass"]) < fig["corpus_pairs"] and fig["aa_skip_tok"] > 0
    for name in ("train_fp16", "train_amp", "spawn"):  # CUDA-only: skipped with a reason
        assert steps[name]["status"] == "SKIP" and steps[name]["reason"]
    assert steps["kill_error"]["status"] == "PASS"
    assert steps["kill_error"]["figures"]["exit"] != 0 and not steps["kill_error"]["figures"]["left"]
    # one PASS/FAIL/SKIP line per step on the console
    assert sum(line.startswith("[check] ") and line.split()[1] in ("PASS", "FAIL", "SKIP")
               for line in proc.stdout.splitlines()) == len(steps)
