"""Launching the runs: fairseq-train (a finished run is reused, an interrupted one
resumes), scripts/evaluate.sh for test BLEU, the noise report of a checkpoint; and the
machine they ran on, with the CPU other work took meanwhile."""

import json
import os
import platform
import re
import resource
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

from . import REPO, USER_DIR, BenchmarkError
from .flags import get_flag, same_command
from .logs import HEADER, parse_line

# fairseq-train, with the plugin's checkpoint-loading fix (torch >= 2.6 refuses fairseq's
# argparse.Namespace) applied first, so that a baseline run (--task translation, no
# --user-dir) can resume from its checkpoint too; nothing else of the plugin is used
# (imported after fairseq_cli.train, whose import sets up fairseq's log format). On Linux
# the child first asks for SIGTERM when its parent dies (prctl PR_SET_PDEATHSIG): a driver
# killed outright (SIGKILL, a closed terminal) must not leave a training that a rerun would
# resume into the same checkpoint folder beside it
DIE_WITH_PARENT = ("import sys; sys.platform == 'linux' and __import__('ctypes').CDLL(None)"
                   ".prctl(1, __import__('signal').SIGTERM); ")
LAUNCH = DIE_WITH_PARENT + ("from fairseq_cli.train import cli_main; "
                            "import autoassist_fairseq.compat; "
                            "sys.argv[0] = 'fairseq-train'; cli_main()")


def machine_record():
    """The machine a benchmark ran on: cores, processor model (/proc/cpuinfo), platform."""
    processor = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                processor = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu_count": os.cpu_count(), "platform": platform.platform(),
            "processor": processor or None, "python": platform.python_version()}


def machine_busy_seconds():
    """CPU seconds all processes of this machine have used since boot (/proc/stat)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def report_progress(name, line, state):
    """Print one line per epoch of the training log line *line*."""
    parsed = parse_line(line)
    if parsed and parsed[0] == "valid":
        state["valid_loss"] = parsed[2].get("loss")
    elif parsed and parsed[0] == "train":
        f = parsed[2]
        extra = (f" | boss tok {int(f['aa_boss_tok'])} | accept tok "
                 f"{f.get('aa_accept_tok')}" if "aa_boss_tok" in f else "")
        print(f"[{name}] epoch {parsed[1]} | updates {int(f.get('num_updates', 0))} | "
              f"valid loss {state['valid_loss']} | wall {f.get('wall')}s{extra}", flush=True)


def run_training(name, data, args, out):
    """Train one run (or reuse a finished one); returns the text of its train.log."""
    run_dir = out / name
    log_path, ckpt_dir = run_dir / "train.log", run_dir / "checkpoints"
    cmd = [sys.executable, "-m", "fairseq_cli.train", str(data)] + args
    # compared without this checkout's paths: another clone (a later session's) reuses it
    header = HEADER + shlex.join(cmd).replace(sys.executable, "python").replace(
        str(REPO), "<repo>") + "\n"
    old = log_path.read_text() if log_path.exists() else ""
    last = old[old.rfind(HEADER):] if HEADER in old else ""
    finished = same_command(shlex.split(last[len(HEADER):].split("\n", 1)[0]),
                            shlex.split(header[len(HEADER):])) and "done training" in last
    if finished and (ckpt_dir / "checkpoint_last.pt").exists():
        print(f"[{name}] finished before: reusing {run_dir}")
        return old
    resume = (ckpt_dir / "checkpoint_last.pt").exists()
    pass_log = get_flag(args, "--assistant-pass-log")
    if pass_log and not resume:  # a fresh run: no records of an earlier attempt's passes
        Path(pass_log).unlink(missing_ok=True)
    print(f"[{name}] {'resuming' if resume else 'training'}; log: {log_path}", flush=True)
    run_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    state = {"valid_loss": None}
    # CPU used by the run (Boss and Assistant) and by the whole machine: the difference is
    # other work that slowed the run down (its wall times are then not comparable)
    start = (time.monotonic(), machine_busy_seconds(), resource.getrusage(resource.RUSAGE_CHILDREN))
    with open(log_path, "a" if resume else "w") as log:
        log.write(header)
        log.flush()
        launch = [sys.executable, "-c", LAUNCH] + cmd[3:]  # cmd without "python -m module"
        proc = subprocess.Popen(launch, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, bufsize=1, env=env, cwd=REPO)
        try:
            for line in proc.stdout:
                log.write(line)
                log.flush()
                report_progress(name, line, state)
        finally:  # Ctrl-C or SIGTERM: the training (and its Assistant) ends with us
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
        rc = proc.wait()
    end = (time.monotonic(), machine_busy_seconds(), resource.getrusage(resource.RUSAGE_CHILDREN))
    run_cpu = sum(getattr(end[2], k) - getattr(start[2], k) for k in ("ru_utime", "ru_stime"))
    (run_dir / "cpu.json").write_text(json.dumps({
        "wall_s": end[0] - start[0], "run_cpu_s": run_cpu, "machine_cpu_s": end[1] - start[1],
        "cores": os.cpu_count(), "resumed": resume}) + "\n")
    text = log_path.read_text()
    if rc != 0:
        tail = "\n".join(line[:400] for line in text.splitlines()[-30:])
        raise BenchmarkError(f"fairseq-train failed for {name} (exit {rc}); last lines of "
                             f"{log_path}:\n{tail}")
    return text


def run_process_group(args, grace=10.0) -> subprocess.CompletedProcess:
    """``subprocess.run(args, capture_output=True, text=True)`` in a process group of its own,
    the whole group ended on any exception (Ctrl-C, SIGTERM turned into SystemExit):
    ``subprocess.run`` would kill only its child, and a script's own children (the
    fairseq-generate of evaluate.sh) would go on writing."""
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate()
    except BaseException:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:  # the group has ended
                break
            try:
                proc.wait(grace)
                break
            except subprocess.TimeoutExpired:
                pass
        raise
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def run_bleu(data, ckpt_dir, subset="test", checkpoint="checkpoint_best.pt"):
    """Test BLEU of ckpt_dir/CHECKPOINT via scripts/evaluate.sh (None on failure, with the
    error shown); the output is kept next to the checkpoints (bleu.log for the best,
    bleu-NAME.log for others) and reused while it is newer than the checkpoint."""
    script = REPO / "scripts" / "evaluate.sh"
    stem = Path(checkpoint).stem
    log = ckpt_dir / ("bleu.log" if checkpoint == "checkpoint_best.pt" else f"bleu-{stem}.log")
    ckpt = ckpt_dir / checkpoint
    if log.exists() and ckpt.exists() and log.stat().st_mtime > ckpt.stat().st_mtime:
        if m := re.search(r"^BLEU = ([\d.]+)", log.read_text(), re.M):
            print(f"[{ckpt_dir.parent.name}] {stem}: {m.group(0)} (from {log})")
            return float(m.group(1))
    if not script.exists():
        print(f"WARNING: {script} not found: no BLEU", file=sys.stderr)
        return None
    proc = run_process_group(["bash", str(script), str(data), str(ckpt_dir), "--subset", subset,
                              "--checkpoint", checkpoint, "--user-dir", str(USER_DIR)])
    log.write_text(proc.stdout + proc.stderr)
    m = re.search(r"^BLEU = ([\d.]+)", proc.stdout, re.M)
    if proc.returncode != 0 or not m:
        print(f"WARNING: evaluate.sh failed for {ckpt} (log: {log}):\n"
              + "\n".join((proc.stdout + proc.stderr).splitlines()[-15:]), file=sys.stderr)
        return None
    print(f"[{ckpt_dir.parent.name}] {stem}: {m.group(0)}", flush=True)
    return float(m.group(1))


def bleu_curve(data, ckpt_dir, curve):
    """Test BLEU of every epoch checkpoint (checkpointE.pt) of a run, of every checkpoint
    saved at a validation inside an epoch (checkpoint_E_U.pt, --save-interval-updates), and
    of its checkpoint_last.pt when the run ended elsewhere (--max-update), as points of its
    curve: {epoch, updates, boss_tokens, wall, bleu}, in update order."""
    by_epoch = {p["epoch"]: p for p in curve}  # an epoch's last validation: its end
    by_update = {p["updates"]: p for p in curve}
    todo = []
    for path in ckpt_dir.glob("checkpoint*.pt"):
        if m := re.fullmatch(r"checkpoint(\d+)\.pt", path.name):
            point = by_epoch.get(int(m.group(1)))
        elif m := re.fullmatch(r"checkpoint_\d+_(\d+)\.pt", path.name):
            point = by_update.get(int(m.group(1)))
        else:
            continue
        if point is not None:
            todo.append((point, path.name))
    if curve and curve[-1]["updates"] not in {p["updates"] for p, _ in todo} and (
            ckpt_dir / "checkpoint_last.pt").exists():
        todo.append((curve[-1], "checkpoint_last.pt"))
    points = []
    for p, name in sorted(todo, key=lambda t: t[0]["updates"]):
        bleu = run_bleu(data, ckpt_dir, checkpoint=name)
        if bleu is not None:
            points.append({k: p[k] for k in ("epoch", "updates", "boss_tokens", "wall")}
                          | {"bleu": bleu})
    return points



def cpu_share_of_others(machine_cpu_s, run_cpu_s, wall_s, cores):
    """Share of the machine's CPU that processes other than a run used while it ran."""
    return max(0.0, machine_cpu_s - run_cpu_s) / (wall_s * cores)


def other_cpu_share(path):
    """Share of the machine's CPU that processes other than the run used while it trained
    (None when not recorded, e.g. a run trained by an older benchmark.py)."""
    if not path.exists():
        return None
    c = json.loads(path.read_text())
    return cpu_share_of_others(c["machine_cpu_s"], c["run_cpu_s"], c["wall_s"], c["cores"])



def diagnose_run(data, ckpt_dir, labels):
    """research.noise_report of a run's checkpoint_last.pt (autoassist-diagnose with noise
    labels; cached in OUT/<run>/diagnosis.json while newer than the checkpoint); None on
    failure, shown."""
    ckpt, out = ckpt_dir / "checkpoint_last.pt", ckpt_dir.parent / "diagnosis.json"
    if out.exists() and ckpt.exists() and out.stat().st_mtime > ckpt.stat().st_mtime:
        return json.loads(out.read_text())
    proc = subprocess.run([sys.executable, "-m", "research.noise_report", "--data",
                           str(data), "--checkpoint", str(ckpt), "--noise-labels", str(labels),
                           "--out", str(out)], capture_output=True, text=True, cwd=REPO)
    if proc.returncode != 0:
        print(f"WARNING: research.noise_report failed for {ckpt}:\n"
              + "\n".join(proc.stderr.splitlines()[-10:]), file=sys.stderr)
        return None
    return json.loads(out.read_text())

