"""The cases of research/fault_replay.py: issue 48's items 1-18 and "not tried yet", the
rows of docs/design.md's faults tables, and a new user's mistakes with every console script.

Each case is ``fn(ctx, folder) -> (Result, Expect, problems)``: it prepares its own copy of
what it damages in *folder* (a fresh folder of its own) and runs the command a user would.
"""

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np

from research.fault_replay import REPO, Expect, run_command, snapshot, unchanged
from research.process_tree import children, descendants

CASES = []
PREFIX = "train.src-tgt.autoassist"
# what counts as naming a fix: an instruction to the user
FIX = ["give ", "rebuild", "rerun", "resume with", "pip install", "remove ", "use ", "run ",
       "build it", "convert", "relaunch", "activate", "free space", "usage:", "expected",
       "choose", "set ", "pass ", "must be"]


def case(name, source):
    def register(fn):
        CASES.append((name, source, fn))
        return fn
    return register


def skipped(name, source, reason):
    CASES.append((name, source, reason))


def error(*names, fix=FIX):
    return Expect(error=True, names=[str(n) for n in names], fix=list(fix))


def works(*says, returncodes=(0,), traceback_ok=None):
    return Expect(error=False, says=list(says), returncodes=returncodes,
                  traceback_ok=traceback_ok)


def copy_data(ctx, folder, name="data"):
    return Path(shutil.copytree(ctx.corpus(), folder / name, symlinks=True))


def one(ctx, cmd, expect, problems=None, timeout=None, **kwargs):
    result = run_command(cmd, timeout or ctx.timeout, **kwargs)
    return result, expect, (problems() if problems else [])


def resume(ctx, folder, *extra, data=None, run=None):
    """A resume of the base run (mid-epoch, update 8) in a copy, 2 updates further."""
    save = ctx.copy_run(run or ctx.base_run(), folder / "ckpt")
    return ctx.train_cmd(data or ctx.corpus(), save, "--max-update", 10, *extra), save


def until_training(pattern=r"\| train_inner \|", then=None, seconds=150):
    """A *during* hook: once a line matches *pattern*, call *then(proc)*."""
    def during(proc, wait_for):
        if wait_for(pattern, seconds) and then is not None:
            then(proc)
    return during


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def assistants_of(pid):
    return [p for p in descendants(pid) if "autoassist-assistant" in cmdline(p)
            or "autoassist-assistant" in _comm(p)]


def _comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read()
    except OSError:
        return ""


def kill(pid, signum):
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


# -- issue 48, items 1-18 ------------------------------------------------------------------

@case("filter_out_is_another_corpus", "issue 48 item 1")
def _(ctx, d):
    other = copy_data(ctx, d, "other")
    shutil.rmtree(other / "raw")
    before = snapshot(other)
    return one(ctx, [ctx.exe("autoassist-filter"), ctx.corpus(), "--out", other],
               error(f"--out {other}", fix=["give a new folder"]),
               lambda: unchanged(before, other))


@case("filter_out_is_a_corpus_with_raw", "issue 48 item 10")
def _(ctx, d):
    other = copy_data(ctx, d, "other")
    before = snapshot(other)
    return one(ctx, [ctx.exe("autoassist-filter"), ctx.corpus(), "--out", other],
               error(f"--out {other}", fix=["give a new folder"]),
               lambda: unchanged(before, other))


@case("resume_with_lower_max_tokens", "issue 48 item 2")
def _(ctx, d):
    cmd, _ = resume(ctx, d)
    cmd[cmd.index("--max-tokens") + 1] = "300"
    return one(ctx, cmd, works("this run's --max-tokens 300", "--reset-dataloader"))


@case("pair_checks_of_wrong_shape", "issue 48 item 3")
def _(ctx, d):
    data = copy_data(ctx, d)
    path = data / f"{PREFIX}.pair-checks.npy"
    checks = np.load(path)
    np.save(path, checks[:, :4])
    return one(ctx, ctx.train_cmd(data, d / "ckpt", "--max-update", 2),
               error(path, fix=["autoassist-features"]),
               lambda: [] if not (d / "ckpt" / "checkpoint_last.pt").exists()
               else ["a checkpoint was written"])


@case("pair_check_settings_out_of_range", "issue 48 item 3")
def _(ctx, d):
    data = copy_data(ctx, d)
    header = data / f"{PREFIX}.json"
    meta = json.loads(header.read_text())
    settings = meta["pair_checks"]["settings"]
    key = next(k for k, v in settings.items() if isinstance(v, float))
    settings[key] = 7.0
    header.write_text(json.dumps(meta))
    return one(ctx, ctx.train_cmd(data, d / "ckpt", "--max-update", 2),
               error(header, fix=["autoassist-features"]))


skipped("two_workers_save_without_validation", "issue 48 item 4",
        "exactness of a 2-worker resume needs two full runs compared batch by batch: "
        "tests/test_distributed.py::test_two_workers_without_validation_resume_exactly")


@case("resume_after_uniform_fallback", "issue 48 item 5")
def _(ctx, d):
    """A run whose Assistant is killed under --assistant-fallback uniform, saved, resumed."""
    save = d / "ckpt"
    first = run_command(
        ctx.train_cmd(ctx.corpus(), save, "--max-update", 14, "--save-interval-updates", 12,
                      "--assistant-fallback", "uniform"), ctx.timeout,
        during=until_training(then=lambda p: [kill(a, signal.SIGKILL)
                                              for a in assistants_of(p.pid)]))
    if "continuing this run on uniform batches" not in first.output:
        return first, works("continuing this run on uniform batches"), []
    kept = "the checkpoints keep the Assistant's last state" in first.output
    # the resumed run goes on with an Assistant (the saved state, where one was read before
    # the failure), not on uniform batches for good
    result, expect, _ = one(ctx, ctx.train_cmd(ctx.corpus(), save, "--max-update", 16),
                            works("Loaded checkpoint", *(["restored Assistant state"] if kept
                                                         else [])))
    problems = ["the resumed run is on uniform batches"] if "uniform batches" in result.output \
        else []
    result.output = first.output + "\n--- resumed ---\n" + result.output
    return result, expect, problems


skipped("fp16_overflow_counts", "issue 48 item 6", "--fp16 needs a GPU: "
        "tests/test_batch_stream.py (an update fairseq does not count)")
skipped("sync_generator_bug", "issue 48 item 7", "a bug of the Boss's own code cannot be "
        "made by a user's command: tests/test_local_source.py")
skipped("held_loss_message_dropped", "issue 48 item 8", "the Assistant's queue filling while "
        "a state loads is internal timing: tests/test_process.py")


@case("no_py3langid_installed", "issue 48 item 9")
def _(ctx, d):
    shim = d / "shim"
    shim.mkdir()
    (shim / "py3langid.py").write_text("raise ImportError('No module named py3langid')\n")
    data = copy_data(ctx, d)
    before = snapshot(data)
    return one(ctx, [ctx.exe("autoassist-features"), data, "-s", "src", "-t", "tgt"],
               error("py3langid", fix=["pip install py3langid"]),
               lambda: unchanged(before, data), env={"PYTHONPATH": str(shim)})


@contextlib.contextmanager
def _tmpfs(folder, options):
    """A tmpfs mounted at *folder* with *options* (read-only, a small size) while the block
    runs; yields whether it was mounted (mounting needs root): a case that cannot mount has
    nothing to replay, rather than replaying on the ordinary disk."""
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)],
                          capture_output=True, text=True)
    try:
        yield done.returncode == 0
    finally:
        if done.returncode == 0:
            subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def _not_mounted(ctx):
    return one(ctx, ["true"], works())  # cannot mount here: nothing to replay


@case("features_into_read_only_folder", "issue 48 item 11")
def _(ctx, d):
    ro = d / "ro"
    with _tmpfs(ro, "ro,size=64k") as mounted:
        if not mounted:
            return _not_mounted(ctx)
        return one(ctx, [ctx.exe("autoassist-features"), ctx.corpus(), "-s", "src", "-t", "tgt",
                         "--prefix", ro / "feats"], error(ro, fix=["give --prefix"]))


@case("features_onto_full_disk", "issue 48 item 12")
def _(ctx, d):
    full = d / "full"
    with _tmpfs(full, "size=8k") as mounted:
        if not mounted:
            return _not_mounted(ctx)
        return one(ctx, [ctx.exe("autoassist-features"), ctx.corpus(), "-s", "src", "-t", "tgt",
                         "--prefix", full / "feats"],
                   error(full, fix=["free space"]),
                   lambda: [f"left behind: {os.listdir(full)}"] if os.listdir(full) else [])


@case("filter_onto_full_disk", "issue 48 item 12")
def _(ctx, d):
    full = d / "full"
    with _tmpfs(full, "size=64k") as mounted:
        if not mounted:
            return _not_mounted(ctx)
        expect = error(full / "out", "No space left", fix=["--out on another disk"])
        expect.wrong = ["--prefix", ".building"]  # not autoassist-filter's flag, nor its folder
        return one(ctx, [ctx.exe("autoassist-filter"), ctx.corpus(), "--out", full / "out"],
                   expect,
                   lambda: [f"left behind: {os.listdir(full)}"] if os.listdir(full) else [])


HEADER = "src\ttgt\tlabel\tbicleaner\n"


def _check_report(ctx, d, name, content: bytes, *names, extra=()):
    labelled = d / name
    labelled.write_bytes(content)
    raw = ctx.corpus() / "raw"
    return one(ctx, [ctx.exe("autoassist-check-report"), labelled, "--clean", raw / "train",
                     "--src", "src", "--tgt", "tgt", "--out", d / "report.json",
                     "--no-opusfilter", *extra],
               error(labelled, *names),
               lambda: ["report written"] if (d / "report.json").exists() else [])


@case("check_report_gz_not_gzip", "issue 48 item 13")
def _(ctx, d):
    return _check_report(ctx, d, "pairs.tsv.gz", (HEADER + "a b\tc d\tV\t0.5\n").encode())


@case("diagnose_checkpoint_of_other_dictionary", "issue 48 item 14")
def _(ctx, d):
    other = ctx.corpus("b", seed=7)
    ckpt = ctx.base_run() / "checkpoint_last.pt"
    return one(ctx, [ctx.exe("autoassist-diagnose"), "--data", other, "--checkpoint", ckpt,
                     "--out", d / "out"], error(ckpt, fix=["give --data"]))


@case("resume_from_empty_checkpoint_last", "issue 48 item 15")
def _(ctx, d):
    cmd, save = resume(ctx, d)
    (save / "checkpoint_last.pt").write_bytes(b"")
    return one(ctx, cmd, error(save / "checkpoint_last.pt", fix=["--restore-file"]))


skipped("undecodable_assistant_message", "issue 48 item 16", "a message damaged in the pipe "
        "cannot be made by a user's command: tests/test_bad_inputs.py")


@case("check_report_tsv_not_utf8", "issue 48 item 17")
def _(ctx, d):
    return _check_report(ctx, d, "pairs.tsv",
                         (HEADER + "a b\tc d\tV\t0.5\n").encode() + b"caf\xe9\tx\tV\t0.5\n",
                         "line 3")


@case("check_report_bicleaner_na", "issue 48 item 17")
def _(ctx, d):
    return _check_report(ctx, d, "pairs.tsv", (HEADER + "a b\tc d\tV\tn/a\n").encode(),
                         "line 2", "bicleaner")


@case("check_report_short_row", "issue 48 item 17")
def _(ctx, d):
    return _check_report(ctx, d, "pairs.tsv",
                         (HEADER + "a b\tc d\tV\t0.5\n" + "a b\tc d\n").encode(), "line 3")


@case("resume_from_overwritten_checkpoint", "issue 48 item 18")
def _(ctx, d):
    cmd, save = resume(ctx, d)
    path = save / "checkpoint_last.pt"
    blob = bytearray(path.read_bytes())
    middle = len(blob) // 2
    blob[middle:middle + 4096] = np.random.default_rng(0).bytes(4096)
    path.write_bytes(bytes(blob))
    return one(ctx, cmd, error(path, fix=["--restore-file"]))


# -- issue 48, not tried yet -------------------------------------------------------------------

@case("resume_one_worker_checkpoint_on_two", "issue 48 not tried: world size 1 -> 2")
def _(ctx, d):
    cmd, _ = resume(ctx, d)
    return one(ctx, ctx.launcher(cmd), error("--reset-dataloader", fix=["Resume with 1 worker"]))


@case("resume_two_worker_checkpoint_on_one", "issue 48 not tried: world size 2 -> 1")
def _(ctx, d):
    cmd, _ = resume(ctx, d, run=ctx.two_worker_run())
    return one(ctx, cmd, error("--reset-dataloader", fix=["Resume with 2 workers"]))


@case("kill9_one_of_two_workers", "issue 48 not tried: kill -9 of one of two workers")
def _(ctx, d):
    def kill_rank1(proc):
        for pid in children(proc.pid):
            if "--distributed-rank 1 " in cmdline(pid) + " ":
                kill(pid, signal.SIGKILL)

    cmd = ctx.launcher(ctx.train_cmd(ctx.corpus(), d / "ckpt", "--max-update", 100000,
                                     "--no-save"))
    return one(ctx, cmd, works("rank 1 was killed by SIGKILL", returncodes=(137,),
                               traceback_ok="rank 0's own gloo error in its collective that "
                                            "lost its peer (design.md); the launcher's last "
                                            "line names the cause"),
               during=until_training(then=kill_rank1), timeout=120)


@case("kill_during_save_cut_checkpoint_last", "issue 48 not tried: a kill during the save")
def _(ctx, d):
    cmd, save = resume(ctx, d)
    path = save / "checkpoint_last.pt"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    return one(ctx, cmd, error(path, fix=["--restore-file"]))


@case("sigterm_in_sync_mode", "issue 48 not tried: SIGTERM in sync mode")
def _(ctx, d):
    cmd = ctx.train_cmd(ctx.corpus(), d / "ckpt", "--max-update", 100000, "--assistant-sync")
    return one(ctx, cmd, works(returncodes=(-signal.SIGTERM,)),
               during=until_training(then=lambda p: kill(p.pid, signal.SIGTERM)))


@case("resume_with_other_seed", "issue 48 not tried: another --seed")
def _(ctx, d):
    cmd, _ = resume(ctx, d)
    cmd[cmd.index("--seed") + 1] = "9"
    return one(ctx, cmd, works("--seed changed from 1 to 9"))


@case("resume_with_other_lambda_max", "issue 48 not tried: another --assistant-lambda-max")
def _(ctx, d):
    cmd, _ = resume(ctx, d, "--assistant-lambda-max", "0.5")
    return one(ctx, cmd, works("--assistant-lambda-max changed"))


@case("resume_with_pair_checks_off", "issue 48 not tried: another --assistant-pair-checks")
def _(ctx, d):
    cmd, _ = resume(ctx, d, "--assistant-pair-checks", "off")
    return one(ctx, cmd, works("the pair checks changed"))


@case("resume_edited_schema_version", "issue 48 not tried: an edited schema version")
def _(ctx, d):
    import torch

    cmd, save = resume(ctx, d)
    path = save / "checkpoint_last.pt"
    state = torch.load(path, weights_only=False)
    state["extra_state"]["train_iterator"]["autoassist"]["schema"] = 99
    torch.save(state, path)
    return one(ctx, cmd, error("schema 99", fix=["upgrade autoassist-fairseq"]))


@case("trace_dir_is_a_file", "issue 48 not tried: a trace folder given as a file")
def _(ctx, d):
    trace = d / "trace"
    trace.write_text("keep\n")
    return one(ctx, ctx.train_cmd(ctx.corpus(), d / "ckpt", "--assistant-trace-dir", trace,
                                  "--max-update", 2),
               error(f"--assistant-trace-dir {trace}", fix=["give a folder"]),
               lambda: [] if trace.read_text() == "keep\n" else ["the file changed"])


@case("resume_on_other_data_same_dictionary", "issue 48 not tried: other data, same dictionary")
def _(ctx, d):
    cmd, _ = resume(ctx, d, data=ctx.same_dict_corpus())
    return one(ctx, cmd, error("other training data", fix=["--reset-dataloader"]))


@case("dead_assistant_on_two_workers_names_the_cause",
      "brief goal 2: every rank names the failed worker and the cause")
def _(ctx, d):
    def kill_rank1_assistant(proc):
        for pid in children(proc.pid):
            if "--distributed-rank 1 " in cmdline(pid) + " ":
                for a in assistants_of(pid):
                    kill(a, signal.SIGKILL)

    cmd = ctx.launcher(ctx.train_cmd(ctx.corpus(), d / "ckpt", "--max-update", 100000,
                                     "--no-save"))
    result, _, _ = one(ctx, cmd, works(), during=until_training(then=kill_rank1_assistant),
                       timeout=150)
    died = [line for line in result.output.splitlines()
            if "every worker stops at this update" in line and "raise " not in line]
    problems = [f"a rank's message does not name worker 1: {line[:200]}" for line in died
                if "worker 1" not in line or "SIGKILL" not in line]
    return result, Expect(error=True, names=["the Assistant of worker 1", "SIGKILL"],
                          fix=["--assistant-fallback uniform"],
                          traceback_ok="a dead Assistant under --assistant-fallback error "
                                       "raises through fairseq's training loop"), problems


# -- docs/design.md's faults table ---------------------------------------------------------

@case("train_feature_file_missing", "design.md: feature file missing")
def _(ctx, d):
    data = copy_data(ctx, d)
    for path in data.glob(PREFIX + ".*"):
        path.unlink()
    return one(ctx, ctx.train_cmd(data, d / "ckpt", "--max-update", 2),
               error(data / PREFIX, fix=["autoassist-features"]))


@case("train_feature_file_empty", "design.md: feature file empty")
def _(ctx, d):
    data = copy_data(ctx, d)
    (data / f"{PREFIX}.data.npy").write_bytes(b"")
    return one(ctx, ctx.train_cmd(data, d / "ckpt", "--max-update", 2),
               error(f"{PREFIX}.data.npy", fix=["autoassist-features"]))


@case("train_feature_file_of_other_corpus", "design.md: feature file of other data")
def _(ctx, d):
    data = copy_data(ctx, d)
    for path in ctx.corpus("b", seed=7).glob(PREFIX + ".*"):
        shutil.copy(path, data / path.name)
    return one(ctx, ctx.train_cmd(data, d / "ckpt", "--max-update", 2),
               error(data / PREFIX, fix=["autoassist-features"]))


@case("train_assistant_features_of_other_corpus", "brief: another corpus's feature file")
def _(ctx, d):
    other = ctx.corpus("b", seed=7) / PREFIX
    return one(ctx, ctx.train_cmd(ctx.corpus(), d / "ckpt", "--max-update", 2,
                                  "--assistant-features", other),
               error(other, fix=["autoassist-features"]))


for _flag, _extra in [("--skip-remainder-batch", []), ("--grouped-shuffling", []),
                      ("--update-epoch-batch-itr", ["True"]), ("--curriculum", ["1"])]:
    def _batching(ctx, d, flag=_flag, extra=_extra):
        return one(ctx, ctx.train_cmd(ctx.corpus(), d / "ckpt", "--max-update", 2, flag, *extra),
                   error(flag, fix=FIX + ["cannot", "not supported"]))
    case(f"train_batching_flag_{_flag.strip('-').replace('-', '_')}",
         "design.md: a fairseq batching flag that cannot hold")(_batching)


@case("train_criterion_without_per_sentence_loss", "design.md: criterion without compute_loss")
def _(ctx, d):
    cmd = ctx.train_cmd(ctx.corpus(), d / "ckpt", "--max-update", 2)
    at = cmd.index("--criterion")
    cmd[at + 1:at + 4] = ["nat_loss"]
    return one(ctx, cmd, error("cross_entropy", fix=["label_smoothed_cross_entropy"]))


for _flag, _value in [("--assistant-lambda-max", "1.5"), ("--assistant-window", "0"),
                      ("--assistant-lr", "-1"), ("--assistant-fallback", "retry"),
                      ("--assistant-rule", "magic"), ("--assistant-warmup", "-3"),
                      ("--assistant-lambda-max", "abc")]:
    def _bad_value(ctx, d, flag=_flag, value=_value):
        return one(ctx, ctx.train_cmd(ctx.corpus(), d / "ckpt", "--max-update", 2, flag, value),
                   error(flag))
    case(f"train_bad_value{_flag.replace('-', '_')}_{_value.replace('.', '_').replace('-', 'm')}",
         "design.md: a bad --assistant-* value")(_bad_value)


@case("assistant_killed_one_worker", "design.md: Assistant killed (e.g. OOM)")
def _(ctx, d):
    cmd = ctx.train_cmd(ctx.corpus(), d / "ckpt", "--max-update", 100000, "--no-save")
    result, _, _ = one(ctx, cmd, works(), during=until_training(
        then=lambda p: [kill(a, signal.SIGKILL) for a in assistants_of(p.pid)]))
    return result, Expect(error=True, names=["SIGKILL"], fix=["--assistant-fallback uniform"],
                          traceback_ok="a dead Assistant under --assistant-fallback error "
                                       "raises through fairseq's training loop"), []


for _sig in ("SIGINT", "SIGTERM", "SIGKILL"):
    def _signal_boss(ctx, d, sig=_sig):
        cmd = ctx.train_cmd(ctx.corpus(), d / "ckpt", "--max-update", 100000, "--no-save",
                            "--num-workers", "1")
        signum = getattr(signal, sig)
        codes = (-signum, 1, 130) if sig == "SIGINT" else (-signum,)
        return one(ctx, cmd, works(returncodes=codes,
                                   traceback_ok="fairseq prints KeyboardInterrupt's traceback "
                                                "on Ctrl-C" if sig == "SIGINT" else None),
                   during=until_training(then=lambda p: kill(p.pid, signum)))
    case(f"boss_{_sig.lower()}_leaves_no_process", f"design.md: {_sig} to the Boss")(_signal_boss)


@case("launcher_sigterm_leaves_no_process", "design.md: launch_cpu_workers.py stopped")
def _(ctx, d):
    cmd = ctx.launcher(ctx.train_cmd(ctx.corpus(), d / "ckpt", "--max-update", 100000,
                                     "--no-save"))
    return one(ctx, cmd, works("SIGTERM received", returncodes=(143, 1, -15),
                               traceback_ok="the workers' KeyboardInterrupt-like ends"),
               during=until_training(then=lambda p: kill(p.pid, signal.SIGTERM)), timeout=150)


@case("data_shard_features_missing", "design.md: --data a:b, a shard's feature file missing")
def _(ctx, d):
    shard = copy_data(ctx, d, "shard2")
    for path in shard.glob(PREFIX + ".*"):
        path.unlink()
    return one(ctx, ctx.train_cmd(f"{ctx.corpus()}:{shard}", d / "ckpt", "--max-update", 2),
               error(shard, fix=["autoassist-features"]))


# -- a new user's mistakes: fairseq-train -----------------------------------------------------

@case("train_data_dir_missing", "new user: fairseq-train on a missing folder")
def _(ctx, d):
    return one(ctx, ctx.train_cmd(d / "nowhere", d / "ckpt"), error(d / "nowhere"))


@case("train_wrong_language_pair", "new user: wrong language pair")
def _(ctx, d):
    return one(ctx, ctx.train_cmd(ctx.corpus(), d / "ckpt", "--source-lang", "de",
                                  "--target-lang", "en"), error("de", fix=FIX + ["--source-lang"]))


@case("train_without_max_tokens", "brief goal 3: no --max-tokens/--batch-size")
def _(ctx, d):
    return one(ctx, ctx.train_cmd(ctx.corpus(), d / "ckpt", max_tokens=False),
               error("--max-tokens", "--batch-size"))


@case("train_restore_file_missing", "new user: --restore-file that does not exist")
def _(ctx, d):
    missing = d / "nothing.pt"
    return one(ctx, ctx.train_cmd(ctx.corpus(), d / "ckpt", "--max-update", 2,
                                  "--restore-file", missing), error(missing))


@case("train_max_tokens_below_longest_pair", "new user: --max-tokens too small")
def _(ctx, d):
    cmd = ctx.train_cmd(ctx.corpus(), d / "ckpt", "--max-update", 2)
    cmd[cmd.index("--max-tokens") + 1] = "8"
    return one(ctx, cmd, error("--max-tokens"))


@case("train_features_unreadable", "new user: unreadable feature file")
def _(ctx, d):
    data = copy_data(ctx, d)
    path = data / f"{PREFIX}.data.npy"
    path.chmod(0)
    if os.geteuid() == 0:  # root reads any file: run as nobody, on a world-readable copy
        return one(ctx, ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                         *ctx.train_cmd(data, "/tmp/fault-replay-unwritable", "--max-update",
                                        2)], error(path, fix=FIX + ["permission"]))
    return one(ctx, ctx.train_cmd(data, d / "ckpt", "--max-update", 2), error(path))


@case("interrupted_run_resumes", "new user: an interrupted run, started again")
def _(ctx, d):
    save = d / "ckpt"
    cmd = ctx.train_cmd(ctx.corpus(), save, "--max-update", 14, "--save-interval-updates", 4)
    first = run_command(cmd, ctx.timeout, during=until_training(
        r"saved checkpoint .*checkpoint_last.pt", then=lambda p: kill(p.pid, signal.SIGINT)))
    if first.orphans or first.timed_out:
        return first, works(), []
    return one(ctx, cmd, works("done training", "Loaded checkpoint"))


# -- a new user's mistakes: the console scripts --------------------------------------------------

@case("features_no_arguments", "new user: autoassist-features")
def _(ctx, d):
    return one(ctx, [ctx.exe("autoassist-features")], error("usage:"))


@case("features_data_dir_missing", "new user: autoassist-features")
def _(ctx, d):
    return one(ctx, [ctx.exe("autoassist-features"), d / "nowhere", "-s", "src", "-t", "tgt"],
               error(d / "nowhere"))


@case("features_data_dir_is_a_file", "new user: autoassist-features")
def _(ctx, d):
    (d / "file").write_text("x\n")
    return one(ctx, [ctx.exe("autoassist-features"), d / "file", "-s", "src", "-t", "tgt"],
               error(d / "file"))


@case("features_data_dir_empty", "new user: autoassist-features")
def _(ctx, d):
    (d / "empty").mkdir()
    return one(ctx, [ctx.exe("autoassist-features"), d / "empty", "-s", "src", "-t", "tgt"],
               error(d / "empty"))


@case("features_wrong_language_pair", "new user: autoassist-features")
def _(ctx, d):
    data = copy_data(ctx, d)
    before = snapshot(data)
    return one(ctx, [ctx.exe("autoassist-features"), data, "-s", "de", "-t", "en"],
               error("de", fix=FIX + ["--source-lang"]), lambda: unchanged(before, data))


@case("features_split_missing", "new user: autoassist-features")
def _(ctx, d):
    return one(ctx, [ctx.exe("autoassist-features"), ctx.corpus(), "-s", "src", "-t", "tgt",
                     "--split", "train7", "--prefix", d / "f"], error("train7"))


@case("filter_data_dir_missing", "new user: autoassist-filter")
def _(ctx, d):
    return one(ctx, [ctx.exe("autoassist-filter"), d / "nowhere", "--out", d / "out"],
               error(d / "nowhere"))


@case("filter_data_without_features", "new user: autoassist-filter")
def _(ctx, d):
    data = copy_data(ctx, d)
    for path in data.glob(PREFIX + ".*"):
        path.unlink()
    return one(ctx, [ctx.exe("autoassist-filter"), data, "--out", d / "out"],
               error(PREFIX, fix=["autoassist-features"]),
               lambda: ["--out written"] if (d / "out").exists() else [])


for _share in ("1.5", "-0.1", "x"):
    def _drop_share(ctx, d, share=_share):
        return one(ctx, [ctx.exe("autoassist-filter"), ctx.corpus(), "--out", d / "out",
                         "--drop-share", share], error("--drop-share"),
                   lambda: ["--out written"] if (d / "out").exists() else [])
    case(f"filter_drop_share_{_share.replace('.', '_').replace('-', 'm')}",
         "new user: autoassist-filter out-of-range flag")(_drop_share)


@case("filter_without_out", "new user: autoassist-filter")
def _(ctx, d):
    return one(ctx, [ctx.exe("autoassist-filter"), ctx.corpus()], error("--out"))


@case("filter_dynamics_files_missing", "new user: autoassist-filter")
def _(ctx, d):
    return one(ctx, [ctx.exe("autoassist-filter"), ctx.corpus(), "--out", d / "out",
                     "--dynamics", d / "a.tsv", d / "b.tsv"], error(d / "a.tsv"),
               lambda: ["--out written"] if (d / "out").exists() else [])


@case("filter_dynamics_checkpoint_is_a_folder", "new user: autoassist-filter")
def _(ctx, d):
    return one(ctx, [ctx.exe("autoassist-filter"), ctx.corpus(), "--out", d / "out",
                     "--dynamics-checkpoint", d], error(d),
               lambda: ["--out written"] if (d / "out").exists() else [])


@case("diagnose_checkpoint_missing", "new user: autoassist-diagnose")
def _(ctx, d):
    return one(ctx, [ctx.exe("autoassist-diagnose"), "--data", ctx.corpus(), "--checkpoint",
                     d / "nothing.pt", "--out", d / "out"], error(d / "nothing.pt"))


@case("diagnose_checkpoint_is_a_folder", "new user: autoassist-diagnose")
def _(ctx, d):
    return one(ctx, [ctx.exe("autoassist-diagnose"), "--data", ctx.corpus(), "--checkpoint",
                     ctx.base_run(), "--out", d / "out"], error(ctx.base_run()))


@case("diagnose_data_missing", "new user: autoassist-diagnose")
def _(ctx, d):
    return one(ctx, [ctx.exe("autoassist-diagnose"), "--data", d / "nowhere", "--checkpoint",
                     ctx.base_run() / "checkpoint_last.pt", "--out", d / "out"],
               error(d / "nowhere"))


for _flag, _value in [("--max-tokens", "0"), ("--sample-pairs", "-5"),
                      ("--reference-share", "2")]:
    def _diag_range(ctx, d, flag=_flag, value=_value):
        return one(ctx, [ctx.exe("autoassist-diagnose"), "--data", ctx.corpus(), "--checkpoint",
                         ctx.base_run() / "checkpoint_last.pt", "--out", d / "out", flag, value],
                   error(flag), lambda: ["--out written"] if (d / "out").exists() else [])
    case(f"diagnose{_flag.replace('-', '_')}_{_value.replace('-', 'm')}",
         "new user: autoassist-diagnose out-of-range flag")(_diag_range)


@case("check_report_labelled_missing", "new user: autoassist-check-report")
def _(ctx, d):
    return one(ctx, [ctx.exe("autoassist-check-report"), d / "none.tsv", "--clean",
                     ctx.corpus() / "raw" / "train", "--src", "src", "--tgt", "tgt", "--out",
                     d / "r.json"], error(d / "none.tsv"))


@case("check_report_labelled_is_a_folder", "new user: autoassist-check-report")
def _(ctx, d):
    return one(ctx, [ctx.exe("autoassist-check-report"), d, "--clean",
                     ctx.corpus() / "raw" / "train", "--src", "src", "--tgt", "tgt", "--out",
                     d / "r.json"], error(d))


@case("check_report_clean_missing", "new user: autoassist-check-report")
def _(ctx, d):
    labelled = d / "pairs.tsv"
    labelled.write_text(HEADER + "a b\tc d\tV\t0.5\n")
    return one(ctx, [ctx.exe("autoassist-check-report"), labelled, "--clean", d / "nothing",
                     "--src", "src", "--tgt", "tgt", "--out", d / "r.json"],
               error(d / "nothing"))


@case("check_report_share_out_of_range", "new user: autoassist-check-report")
def _(ctx, d):
    labelled = d / "pairs.tsv"
    labelled.write_text(HEADER + "a b\tc d\tV\t0.5\n")
    return one(ctx, [ctx.exe("autoassist-check-report"), labelled, "--clean",
                     ctx.corpus() / "raw" / "train", "--src", "src", "--tgt", "tgt", "--out",
                     d / "r.json", "--share", "1.5"], error("--share"))


@case("check_report_wrong_languages", "new user: autoassist-check-report")
def _(ctx, d):
    labelled = d / "pairs.tsv"
    labelled.write_text(HEADER + "a b\tc d\tV\t0.5\n")
    return one(ctx, [ctx.exe("autoassist-check-report"), labelled, "--clean",
                     ctx.corpus() / "raw" / "train", "--src", "en", "--tgt", "de", "--out",
                     d / "r.json"], error("en"))


@case("score_pairs_input_missing", "new user: autoassist-score-pairs")
def _(ctx, d):
    return one(ctx, [ctx.exe("autoassist-score-pairs"), "--src", "src", "--tgt", "tgt",
                     d / "none.tsv"], error(d / "none.tsv"))


@case("score_pairs_input_is_a_folder", "new user: autoassist-score-pairs")
def _(ctx, d):
    return one(ctx, [ctx.exe("autoassist-score-pairs"), "--src", "src", "--tgt", "tgt", d],
               error(d))


@case("score_pairs_input_empty", "new user: autoassist-score-pairs")
def _(ctx, d):
    (d / "empty.tsv").write_text("")
    return one(ctx, [ctx.exe("autoassist-score-pairs"), "--src", "src", "--tgt", "tgt",
                     d / "empty.tsv", "--out", d / "out.tsv"], error(d / "empty.tsv"))


@case("score_pairs_one_column", "new user: autoassist-score-pairs")
def _(ctx, d):
    (d / "one.tsv").write_text("a sentence without a tab\n" * 20)
    return one(ctx, [ctx.exe("autoassist-score-pairs"), "--src", "src", "--tgt", "tgt",
                     d / "one.tsv", "--out", d / "out.tsv"], error(d / "one.tsv"))


for _flag, _value in [("--batch-size", "0"), ("--fit-pairs", "0"), ("--bpe-size", "-1")]:
    def _score_range(ctx, d, flag=_flag, value=_value):
        src = (ctx.corpus() / "raw" / "train.src").read_text().splitlines()
        tgt = (ctx.corpus() / "raw" / "train.tgt").read_text().splitlines()
        (d / "pairs.tsv").write_text("".join(f"{a}\t{b}\n" for a, b in zip(src, tgt)))
        return one(ctx, [ctx.exe("autoassist-score-pairs"), "--src", "src", "--tgt", "tgt",
                         d / "pairs.tsv", "--out", d / "out.tsv", flag, value], error(flag),
                   lambda: ["--out written"] if (d / "out.tsv").exists() else [])
    case(f"score_pairs{_flag.replace('-', '_')}_{_value.replace('-', 'm')}",
         "new user: autoassist-score-pairs out-of-range flag")(_score_range)


@case("score_pairs_spm_model_missing", "new user: autoassist-score-pairs")
def _(ctx, d):
    (d / "pairs.tsv").write_text("a b\tc d\n" * 20)
    return one(ctx, [ctx.exe("autoassist-score-pairs"), "--src", "src", "--tgt", "tgt",
                     d / "pairs.tsv", "--spm-model", d / "none.model", "--out", d / "o.tsv"],
               error(d / "none.model"))


@case("score_pairs_out_in_missing_folder", "new user: autoassist-score-pairs")
def _(ctx, d):
    (d / "pairs.tsv").write_text("a b\tc d\n" * 20)
    return one(ctx, [ctx.exe("autoassist-score-pairs"), "--src", "src", "--tgt", "tgt",
                     d / "pairs.tsv", "--out", d / "no" / "o.tsv"], error(d / "no"))


@case("launcher_misspelt_command", "new user: scripts/launch_cpu_workers.py")
def _(ctx, d):
    return one(ctx, [sys.executable, REPO / "scripts" / "launch_cpu_workers.py", "2", "--",
                     "fairseq-trian", ctx.corpus()], error("fairseq-trian"))


@case("launcher_zero_workers", "new user: scripts/launch_cpu_workers.py")
def _(ctx, d):
    return one(ctx, [sys.executable, REPO / "scripts" / "launch_cpu_workers.py", "0", "--",
                     ctx.exe("fairseq-train"), ctx.corpus()], error("workers"))


del _
