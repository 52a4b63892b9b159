"""A replay of the fault and bad-input probes (issue 48): every case run as a user would,
through the real console scripts and ``fairseq-train --user-dir ... --task
autoassist_translation`` on a tiny synthetic corpus, each command under a hard timeout, and
classified:

* OK: a clear error naming the file or flag and the fix (no traceback), or correct
  behaviour;
* CRASH: a Python traceback reaches the user;
* SILENT WRONG: a wrong result, or something written or damaged, without an error;
* HANG: the command ran past its timeout;
* ORPHAN: a process of the case outlived its command (every process a case starts carries
  an environment marker of its own, read from /proc);
* POOR: an error without a traceback that does not name the file or flag and the fix, or a
  refusal of a command that should run;
* SKIPPED: not replayable by a user's commands here (the reason is given; the test that
  covers it is named).

Writes ``WORK/replay.json`` and ``WORK/replay.md``. Example::

    .venv/bin/python -m research.fault_replay --work /tmp/replay
    .venv/bin/python -m research.fault_replay --work /tmp/replay --only 'train_*,kill*'

The corpus and the short runs the resume cases copy are built once in WORK and reused by a
later replay in the same WORK. Not part of the test suite (it takes minutes);
``tests/test_fault_replay.py`` checks its classifier.
"""

import argparse
import fnmatch
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, List, Optional

REPO = Path(__file__).resolve().parents[1]
USER_DIR = str(REPO / "autoassist_fairseq")
BIN = Path(sys.executable).parent
MARKER = "FAULT_REPLAY_CASE"
TRACEBACK = "Traceback (most recent call last)"
VERDICTS = ("OK", "CRASH", "SILENT WRONG", "HANG", "ORPHAN", "POOR", "SKIPPED", "SETUP")

TINY = ["--arch", "transformer", "--encoder-layers", "1", "--decoder-layers", "1",
        "--encoder-embed-dim", "32", "--decoder-embed-dim", "32",
        "--encoder-ffn-embed-dim", "64", "--decoder-ffn-embed-dim", "64",
        "--encoder-attention-heads", "2", "--decoder-attention-heads", "2",
        "--share-all-embeddings"]


# -- running one command ------------------------------------------------------------------

@dataclass
class Result:
    cmd: List[str]
    returncode: Optional[int]
    output: str
    seconds: float
    timed_out: bool = False
    orphans: List[str] = field(default_factory=list)


def marked_processes(token: str) -> List[int]:
    """The processes whose environment carries ``MARKER=token`` (zombies have none)."""
    needle = f"{MARKER}={token}\0".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle in f.read():
                    found.append(int(entry))
        except OSError:
            pass
    return found


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()[:160]
    except OSError:
        return "?"


def run_command(cmd, timeout: float, env: Optional[dict] = None, cwd=None,
                during: Optional[Callable] = None, stdin_data: Optional[str] = None,
                grace: float = 15.0) -> Result:
    """Run *cmd* in a session of its own under *timeout* seconds (then it is killed: HANG).
    *during(proc, wait_for)*, if given, runs while it does (``wait_for(pattern, seconds)``
    waits for an output line matching *pattern*). Then processes marked as this command's
    are given *grace* seconds to end; those left are listed and killed (ORPHAN)."""
    token = uuid.uuid4().hex
    full_env = dict(os.environ, **(env or {}), **{MARKER: token})
    full_env.setdefault("OMP_NUM_THREADS", "1")
    start = time.monotonic()
    proc = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, stdin=subprocess.PIPE if stdin_data
                            is not None else subprocess.DEVNULL, env=full_env, cwd=cwd,
                            start_new_session=True)
    lines: List[str] = []
    seen = threading.Condition()

    def read():
        for raw in iter(proc.stdout.readline, b""):
            with seen:
                lines.append(raw.decode(errors="replace"))
                seen.notify_all()
        with seen:
            lines.append("")  # the end of the output
            seen.notify_all()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    if stdin_data is not None:
        try:
            proc.stdin.write(stdin_data.encode())
            proc.stdin.close()
        except OSError:
            pass

    def wait_for(pattern: str, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        with seen:
            while True:
                if any(re.search(pattern, line) for line in lines):
                    return True
                if lines[-1:] == [""] or time.monotonic() > deadline:
                    return False
                seen.wait(0.2)

    if during is not None:
        during(proc, wait_for)
    timed_out = False
    try:
        proc.wait(timeout=max(1.0, timeout - (time.monotonic() - start)))
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill(proc.pid, marked_processes(token))
        proc.wait()
    seconds = time.monotonic() - start
    reader.join(10)
    deadline = time.monotonic() + grace
    left = marked_processes(token)
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = marked_processes(token)
    orphans = [f"{pid}: {_cmdline(pid)}" for pid in left]
    _kill(None, left)
    return Result([str(c) for c in cmd], proc.returncode, "".join(lines), round(seconds, 1),
                  timed_out, orphans)


def _kill(session: Optional[int], pids: List[int]) -> None:
    if session is not None:
        try:
            os.killpg(session, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


# -- classification -----------------------------------------------------------------------

@dataclass
class Expect:
    """What a case's command should do. ``error``: stop with an error (exit code not 0)
    whose text holds every one of *names* (the file or flag) and one of *fix* (the fix);
    otherwise succeed (exit code 0; *returncodes* widens what counts as success, e.g. a
    signal's), its output holding every one of *says*; either way none of *wrong* (advice
    that does not apply, e.g. another command's flag). *traceback_ok*: why a traceback is
    the documented behaviour here (it is still reported)."""
    error: bool
    names: List[str] = field(default_factory=list)
    fix: List[str] = field(default_factory=list)
    says: List[str] = field(default_factory=list)
    returncodes: tuple = (0,)
    traceback_ok: Optional[str] = None
    wrong: List[str] = field(default_factory=list)  # advice that must not be given


def classify(result: Result, expect: Expect, problems: List[str] = ()) -> tuple:
    """``(verdict, note)`` for *result* against *expect*; *problems*: what the case's own
    check found wrong after the command (files changed, a wrong result)."""
    out = result.output
    if result.timed_out:
        return "HANG", f"still running after {result.seconds:.0f}s"
    if result.orphans:
        return "ORPHAN", "; ".join(result.orphans)
    if TRACEBACK in out and not expect.traceback_ok:
        return "CRASH", _last_line(out)
    if problems:
        return "SILENT WRONG", "; ".join(problems)
    wrong = [w for w in expect.wrong if w in out]
    if wrong:
        return "POOR", f"wrong advice {wrong}: {_error_line(out)}"
    if expect.error:
        if result.returncode == 0:
            return "SILENT WRONG", "exit code 0 where an error is due"
        missing = [n for n in expect.names if n not in out]
        if missing:
            return "POOR", f"the error does not name {missing}: {_last_line(out)}"
        if expect.fix and not any(f in out for f in expect.fix):
            return "POOR", f"the error names no fix ({expect.fix}): {_last_line(out)}"
        return "OK", _error_line(out)
    if result.returncode not in expect.returncodes:
        return "POOR", f"exit code {result.returncode}: {_last_line(out)}"
    missing = [s for s in expect.says if s not in out]
    if missing:
        return "SILENT WRONG", f"the output does not say {missing}"
    note = _error_line(out) if expect.says else "ran"
    if TRACEBACK in out:
        note = f"traceback allowed: {expect.traceback_ok}; {note}"
    return "OK", note


def _last_line(out: str) -> str:
    lines = [line for line in out.splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no output)"


def _error_line(out: str) -> str:
    for line in reversed(out.splitlines()):
        if re.search(r"error:|ERROR|WARNING|\[launcher\]", line):
            return line.strip()[:300]
    return _last_line(out)


# -- the shared corpus and runs ----------------------------------------------------------

class SetupError(RuntimeError):
    pass


class Context:
    def __init__(self, work: Path, timeout: float):
        self.work, self.timeout = work, timeout
        self.cases = work / "cases"
        self._shared = {}

    def exe(self, name: str) -> str:
        return str(BIN / name)

    def must(self, cmd, timeout=600, **kwargs) -> Result:
        result = run_command(cmd, timeout, **kwargs)
        if result.returncode != 0 or result.timed_out:
            raise SetupError(f"{' '.join(map(str, cmd))[:300]} failed ({result.returncode}):\n"
                             f"{result.output[-3000:]}")
        return result

    def train_cmd(self, data, save_dir, *extra, max_tokens=True):
        return [self.exe("fairseq-train"), str(data), "--user-dir", USER_DIR,
                "--task", "autoassist_translation", *TINY, "--optimizer", "adam",
                "--lr", "0.005", "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "20",
                "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1",
                *(["--max-tokens", "600"] if max_tokens else []), "--cpu", "--seed", "1",
                "--save-dir", str(save_dir), "--log-format", "simple", "--log-interval", "2",
                "--no-epoch-checkpoints", "--num-workers", "0", "--assistant-window", "128",
                *map(str, extra)]

    def launcher(self, cmd, workers=2):
        return [sys.executable, str(REPO / "scripts" / "launch_cpu_workers.py"), str(workers),
                "--", *cmd]

    def corpus(self, name="a", seed=1, pairs=300) -> Path:
        """A synthetic corpus prepared by scripts/prepare-corpus.sh, with features."""
        root = self.work / f"corpus-{name}"
        data = root / "data"
        if (data / "train.src-tgt.autoassist.json").exists():
            return data
        shutil.rmtree(root, ignore_errors=True)
        self.must([sys.executable, REPO / "scripts" / "make_synthetic_corpus.py", "--out",
                   root / "raw", "--pairs", pairs, "--valid", 40, "--test", 30, "--seed", seed])
        self.must(["bash", REPO / "scripts" / "prepare-corpus.sh", "--src", "src", "--tgt",
                   "tgt", "--train", root / "raw" / "train", "--valid", root / "raw" / "valid",
                   "--test", root / "raw" / "test", "--out", data, "--bpe-size", 300],
                  env={"PATH": f"{BIN}:{os.environ['PATH']}"})
        return data

    def same_dict_corpus(self) -> Path:
        """Corpus a's dictionary, other training pairs (the first 200 of its 300)."""
        data = self.corpus()
        out = self.work / "corpus-a200"
        if (out / "train.src-tgt.autoassist.json").exists():
            return out
        shutil.rmtree(out, ignore_errors=True)
        text = self.work / "corpus-a200-text"
        text.mkdir(parents=True, exist_ok=True)
        for side in ("src", "tgt"):
            lines = (data / "raw" / f"train.{side}").read_text().splitlines(True)
            (text / f"train.{side}").write_text("".join(lines[:200]))
        self.must([self.exe("fairseq-preprocess"), "--source-lang", "src", "--target-lang",
                   "tgt", "--trainpref", text / "train", "--destdir", out, "--srcdict",
                   data / "dict.src.txt", "--tgtdict", data / "dict.tgt.txt", "--workers", "1"])
        for name in data.glob("valid.*"):
            shutil.copy(name, out / name.name)
        self.must([self.exe("autoassist-features"), out, "-s", "src", "-t", "tgt"])
        return out

    def base_run(self) -> Path:
        """8 updates of the tiny model on corpus a, saved every 4 (mid-epoch):
        checkpoint_last.pt at update 8, in the middle of epoch 1."""
        save = self.work / "run-base"
        if (save / "checkpoint_last.pt").exists():
            return save
        shutil.rmtree(save, ignore_errors=True)
        self.must(self.train_cmd(self.corpus(), save, "--max-update", 8,
                                 "--save-interval-updates", 4))
        return save

    def two_worker_run(self) -> Path:
        """The same on two workers (launch_cpu_workers.py): a mid-pass checkpoint of 2."""
        save = self.work / "run-two"
        if (save / "checkpoint_last.pt").exists():
            return save
        shutil.rmtree(save, ignore_errors=True)
        self.must(self.launcher(self.train_cmd(self.corpus(), save, "--max-update", 4,
                                               "--save-interval-updates", 2)))
        return save

    def case_dir(self, name: str) -> Path:
        path = self.cases / name
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
        return path

    def copy_run(self, source: Path, dest: Path) -> Path:
        shutil.copytree(source, dest)
        return dest


# -- helpers for the cases (research/fault_cases.py) ----------------------------------------

def snapshot(folder: Path) -> dict:
    """Every file under *folder* (not following links) with its size and mtime."""
    found = {}
    for path in sorted(Path(folder).rglob("*")):
        if path.is_symlink():
            found[str(path)] = ("link", os.readlink(path))
        elif path.is_file():
            stat = path.stat()
            found[str(path)] = (stat.st_size, stat.st_mtime_ns)
    return found


def unchanged(before: dict, folder: Path) -> List[str]:
    """A problem where *folder*'s files differ from *before* (a :func:`snapshot`)."""
    after = snapshot(folder)
    if after == before:
        return []
    changed = sorted(set(before) ^ set(after) | {k for k in before if after.get(k) != before[k]})
    return [f"{len(changed)} files changed in {folder}: {', '.join(changed[:4])}"]


# -- the replay -------------------------------------------------------------------------

def replay(work: Path, only: Optional[str], timeout: float) -> List[dict]:
    from research.fault_cases import CASES

    ctx = Context(work, timeout)
    rows = []
    patterns = only.split(",") if only else None
    for name, source, fn in CASES:
        if patterns and not any(fnmatch.fnmatch(name, p) for p in patterns):
            continue
        row = {"case": name, "source": source}
        if isinstance(fn, str):
            row.update(verdict="SKIPPED", note=fn, seconds=0)
        else:
            start = time.monotonic()
            try:
                folder = ctx.case_dir(name)
                result, expect, problems = fn(ctx, folder)
                (folder / "output.txt").write_text(" ".join(result.cmd) + "\n\n" + result.output)
                verdict, note = classify(result, expect, problems)
                row.update(verdict=verdict, note=note, seconds=result.seconds,
                           command=" ".join(result.cmd)[:400],
                           returncode=result.returncode, output_tail=result.output[-2500:])
            except SetupError as err:
                row.update(verdict="SETUP", note=str(err)[-2000:],
                           seconds=round(time.monotonic() - start, 1))
        rows.append(row)
        print(f"{row['verdict']:12} {name:44} {row['seconds']:6.1f}s  {row['note'][:150]}",
              flush=True)
    return rows


def write_tables(rows: List[dict], work: Path) -> None:
    counts = {v: sum(r["verdict"] == v for r in rows) for v in VERDICTS}
    (work / "replay.json").write_text(json.dumps({"counts": counts, "cases": rows}, indent=1))
    lines = ["# Fault replay", "", " | ".join(f"{v}: {n}" for v, n in counts.items() if n), "",
             "| case | source | verdict | what the user sees |", "|---|---|---|---|"]
    for r in rows:
        note = r["note"].replace("|", "\\|").replace("\n", " ")[:400]
        lines.append(f"| {r['case']} | {r['source']} | {r['verdict']} | {note} |")
    (work / "replay.md").write_text("\n".join(lines) + "\n")
    print(" ".join(f"{v}={n}" for v, n in counts.items()))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, required=True,
                        help="folder for the corpus, the runs, each case's files and the tables")
    parser.add_argument("--only", help="comma-separated name patterns of the cases to run "
                                       "(fnmatch, e.g. 'train_*,kill*')")
    parser.add_argument("--timeout", type=float, default=180,
                        help="seconds a case's command may run before it counts as a HANG")
    parser.add_argument("--list", action="store_true", help="print the cases and exit")
    args = parser.parse_args(argv)
    if args.list:
        from research.fault_cases import CASES

        for name, source, fn in CASES:
            print(f"{name:44} {source}" + ("  [skipped]" if isinstance(fn, str) else ""))
        return 0
    args.work.mkdir(parents=True, exist_ok=True)
    rows = replay(args.work.resolve(), args.only, args.timeout)
    bad = [r for r in rows if r["verdict"] not in ("OK", "SKIPPED")]
    write_tables(merge_rows(args.work / "replay.json", rows) if args.only else rows, args.work)
    return 1 if bad else 0


def merge_rows(table: Path, rows: List[dict]) -> List[dict]:
    """The rows of an earlier replay's *table* with *rows* (a replay of some cases, --only)
    in place of theirs, in the earlier order; new cases at the end."""
    if not table.exists():
        return rows
    fresh = {r["case"]: r for r in rows}
    earlier = json.loads(table.read_text())["cases"]
    merged = [fresh.pop(r["case"], r) for r in earlier]
    return merged + list(fresh.values())


if __name__ == "__main__":
    sys.exit(main())
