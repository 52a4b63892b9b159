"""Training runs of research/gpu/check_steps.py and what each step reads from them."""

import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FATAL_TRACES = Path(__file__).resolve().parent / "fatal_traces"  # --cpp-traces
STEP_TIMEOUT = 900  # seconds, when no --time-limit is nearer


class Run:
    """One command in its own process group, its output kept and appended to the log."""

    def __init__(self, name, proc):
        self.name, self.proc, self.pid = name, proc, proc.pid
        self.lines, self.returncode, self.seconds_after_kill = [], None, None

    @classmethod
    def start(cls, ctx, name, cmd):
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        if ctx.get("cpp_traces"):
            env["PYTHONPATH"] = os.pathsep.join(
                [str(FATAL_TRACES)] + [p for p in [env.get("PYTHONPATH")] if p])
            env["PYTHONFAULTHANDLER"] = "1"
        proc = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, cwd=REPO, env=env,
                                start_new_session=True)
        run = cls(name, proc)
        run.cmd = [str(c) for c in cmd]
        return run

    def timeout(self, ctx):
        if ctx["deadline"] is None:
            return STEP_TIMEOUT
        return max(10.0, min(STEP_TIMEOUT, ctx["deadline"] - time.monotonic()))

    def wait_for(self, ctx, text):
        """Read lines until one holds *text*; False at the end of output or the timeout."""
        deadline = time.monotonic() + self.timeout(ctx)
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                return False
            self.lines.append(line)
            if text in line:
                return True
        return False

    def finish(self, ctx, timeout=None):
        """Wait for the end (the whole group is killed at the timeout); log the output."""
        try:
            out, _ = self.proc.communicate(timeout=timeout or self.timeout(ctx))
        except subprocess.TimeoutExpired:
            os.killpg(self.pid, signal.SIGKILL)
            out, _ = self.proc.communicate()
            out += f"\n[check] killed: still running after {timeout or self.timeout(ctx):.0f}s\n"
        self.lines.append(out)
        self.returncode = self.proc.returncode
        with open(ctx["log"], "a") as log:
            log.write(f"==== {self.name}: {' '.join(self.cmd)}\n{self.output}\n"
                      f"==== {self.name}: exit {self.returncode}\n")
        return self

    @property
    def output(self):
        return "".join(self.lines)


def fairseq_train(ctx, name, flags, finish=True):
    """fairseq-train on the check's corpus and config, in a fresh WORK/NAME folder."""
    shutil.rmtree(ctx["work"] / name, ignore_errors=True)  # a trace appends to its file
    exe = Path(sys.executable).parent / "fairseq-train"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "fairseq_cli.train"]
    cmd += [ctx["data"]] + ctx["tokens"] + ["--save-dir", ctx["work"] / name, "--no-save",
                                            "--disable-validation"] + flags
    run = Run.start(ctx, name, cmd)
    return run.finish(ctx) if finish else run


def log_records(output, kind="train_inner"):
    """The numeric fields of fairseq's log lines of one kind (research.bench.logs)."""
    from research.bench.logs import parse_line

    return [fields for tag, _, fields in filter(None, map(parse_line, output.splitlines()))
            if tag == kind]


def trace_passes(trace_dir):
    """Pairs trained in each data pass (fairseq epoch) of ``--assistant-trace-dir``."""
    pairs = Counter()
    with open(Path(trace_dir) / "trained.rank0.tsv") as f:
        for line in f:
            epoch, _update, ids = line.rstrip("\n").split("\t")
            pairs[int(epoch)] += len(ids.split(","))
    return [pairs[e] for e in sorted(pairs)]


def train_checks(ctx, run, trace_dir):
    """(status, reason, figures) of a finished autoassist training run."""
    if run.returncode != 0 or "done training" not in run.output:
        return "FAIL", f"fairseq-train exited with {run.returncode} (see gpu-check.log)", {}
    recs = log_records(run.output)
    last = recs[-1] if recs else {}
    wall = last.get("wall") or None
    fig = {"updates": last.get("num_updates"), "wall_s": wall,
           "loss": last.get("loss"), "aa_lambda": last.get("aa_lambda"),
           "aa_accept_sent": last.get("aa_accept_sent"), "aa_boss_tok": last.get("aa_boss_tok"),
           "aa_skip_tok": last.get("aa_skip_tok"), "aa_dropped": last.get("aa_dropped", 0),
           "overflows": run.output.count("overflow detected"),
           "wait_share": (sum(r.get("aa_wait_s", 0.0) for r in recs) / wall) if wall else None}
    passes = trace_passes(trace_dir)
    fig["pairs_per_pass"], fig["corpus_pairs"] = passes, ctx["pairs"]
    if not any("aa_acc" in r for r in recs):
        return "FAIL", "no aa_acc logged: no loss reached the Assistant", fig
    learned_rule = not ctx["profile"]["rule"]  # the random rule skips with lambda_k 0
    if not any((r.get("aa_lambda", 0) > 0 or not learned_rule) and r.get("aa_accept_sent", 1) < 1
               for r in recs):
        return "FAIL", "no skipping logged (aa_lambda > 0 with aa_accept_sent < 1)", fig
    whole = [n for e, n in enumerate(passes, 1) if f"end of epoch {e} " in run.output]
    if not whole:
        return "FAIL", "the trace holds no whole data pass: raise the updates", fig
    if min(whole) >= ctx["pairs"]:
        return "FAIL", f"every whole pass of the trace trained all {ctx['pairs']} pairs", fig
    limit = ctx["profile"]["wait_share_max"]
    if limit is not None and (fig["wait_share"] or 0) > limit:
        return "FAIL", f"the Boss waited {fig['wait_share']:.1%} of the run, over {limit:.0%}", fig
    return "PASS", "", fig


def group_alive(pgid):
    """Pids of the process group *pgid* still running (zombies excluded)."""
    alive = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            alive.append(int(stat.parent.name))
    return alive


def forked_children(pid):
    """The Assistant processes among the children of *pid*: titled ``autoassist-assistant
    (rank R)`` (setproctitle), or, without setproctitle, forked with its command line."""
    def cmdline(p):
        try:
            return Path(f"/proc/{p}/cmdline").read_bytes()
        except OSError:
            return None
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []
    own = cmdline(pid)
    return [int(k) for k in kids if (cmdline(int(k)) or b"").startswith(b"autoassist-assistant")
            or cmdline(int(k)) == own]


def kill_assistant_during(ctx, name, flags):
    """SIGKILL the Assistant at the first logged update; checks by the fallback's rule."""
    fallback = flags[flags.index("--assistant-fallback") + 1]
    run = fairseq_train(ctx, name, flags, finish=False)
    if not run.wait_for(ctx, "| train_inner |"):
        os.killpg(run.pid, signal.SIGKILL)
        run.finish(ctx)
        return "FAIL", "training did not reach its first log line (see gpu-check.log)", {}
    kids = forked_children(run.pid)
    if len(kids) != 1:
        os.killpg(run.pid, signal.SIGKILL)
        run.finish(ctx)
        return "FAIL", f"expected one Assistant process, found {kids}", {}
    os.kill(kids[0], signal.SIGKILL)
    killed = time.monotonic()
    run.finish(ctx, timeout=60 if fallback == "error" else None)
    seconds = time.monotonic() - killed
    left = group_alive(run.pid)
    if left:
        os.killpg(run.pid, signal.SIGKILL)
    fig = {"exit": run.returncode, "seconds_after_kill": round(seconds, 1), "left": left}
    status, reason = kill_verdict(fallback, run.returncode, run.output, seconds, left)
    return status, reason, fig


def kill_verdict(fallback, returncode, out, seconds, left):
    """(status, reason) of a run whose Assistant was killed, by the fallback's rule."""
    if left:
        return "FAIL", f"processes left behind: {left}"
    # a negative exit is a signal: the process died (e.g. SIGABRT from a C++ terminate at
    # interpreter exit) instead of ending with its error or its result
    died = (f"the process ended by signal {-returncode} ({_signal_name(-returncode)}) "
            "instead of exiting" if returncode is not None and returncode < 0 else "")
    if fallback == "error":
        if returncode == 0 or "Assistant process died" not in out or "SIGKILL" not in out:
            return "FAIL", "the run did not stop with the Assistant's death as its cause"
        if seconds > 10:
            return "FAIL", f"the run stopped {seconds:.0f}s after the kill (goal: ~1 s)"
        if died:
            return "FAIL", f"the error was raised, but {died} with it"
        return "PASS", ""
    if "continuing this run on uniform batches" not in out or "done training" not in out:
        return "FAIL", "the run did not continue on uniform batches to its end"
    if returncode != 0:
        return "FAIL", (f"it trained to its end on uniform batches, but {died}" if died
                        else f"it trained to its end, but exited with {returncode}")
    return "PASS", ""


def _signal_name(number):
    try:
        return signal.Signals(number).name
    except ValueError:
        return "unknown signal"
