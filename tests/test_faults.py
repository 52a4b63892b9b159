"""Faults and bad input: clear errors within seconds, no hang, no orphan process."""

import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

from utils import (BIN, REPO, children, descendants, log_records, read_trace, run, running,
                   train_args)


def _restore_sigint():
    # a shell without job control starts background commands with SIGINT ignored, and
    # Python keeps that: restore the default so that Ctrl-C reaches fairseq-train however
    # the suite was started (seen: `nohup bash scripts/test.sh &` failed the Ctrl-C test)
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(args):
    args = [str(BIN / args[0])] + [str(a) for a in args[1:]]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, preexec_fn=_restore_sigint)


def _is_assistant(pid):
    with open(f"/proc/{pid}/cmdline") as f:
        return f.read().startswith("autoassist-assistant")


def _wait_for_training(proc, timeout=120, loaders=0):
    """Read the log until the first train_inner line; returns the Assistant's pid. The
    Boss's children are its Assistant and *loaders* data loader processes."""
    lines, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        lines.append(line)
        if "| train_inner |" in line:
            kids = children(proc.pid)
            assistants = [kid for kid in kids if _is_assistant(kid)]
            assert len(assistants) == 1 and len(kids) == 1 + loaders, kids
            return assistants[0], lines
    proc.kill()
    pytest.fail("training did not start:\n" + "".join(lines[-50:]))


def _finish(proc, lines, timeout):
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # a failing test leaves no training behind
        out, _ = proc.communicate()
        pytest.fail(f"fairseq-train still running {timeout}s later:\n"
                    + ("".join(lines) + out)[-3000:])
    return "".join(lines) + out


def _long_run(data, save_dir, *extra):
    return train_args(data, save_dir, extra=["--max-update", "100000", "--no-save", *extra])


# the default window: a window's message is larger than a pipe's buffer, so a killed
# Assistant may leave one half written (the case that used to hang the Boss)
DEFAULT_WINDOW = ("--assistant-window", "4096")


def test_killed_assistant_stops_the_run_with_the_cause(big_data, tmp_path):
    proc = _start(_long_run(big_data, tmp_path, *DEFAULT_WINDOW))
    assistant, lines = _wait_for_training(proc)
    os.kill(assistant, signal.SIGKILL)
    out = _finish(proc, lines, timeout=60)
    assert proc.returncode != 0
    # the death seen by the liveness check, not a wait's timeout ("sent nothing for 120s")
    assert "Assistant process died" in out and "killed by SIGKILL" in out
    assert "sent nothing" not in out
    assert "--assistant-fallback uniform" in out
    assert not running(assistant) and children(proc.pid) == []


# a dead Assistant under --assistant-fallback uniform: test_distributed.py's
# test_one_dead_assistant_stops_or_falls_back_on_every_rank[uniform]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_interrupt_or_a_killed_boss_leaves_no_process(train_data, tmp_path, sig):
    """Ctrl-C, a scheduler's SIGTERM or SIGKILL of fairseq-train, with a data loader process
    (--num-workers 1): the Assistant and the loader end with it."""
    proc = _start(_long_run(train_data, tmp_path, "--num-workers", "1", "--log-interval", "1"))
    assistant, lines = _wait_for_training(proc, loaders=1)
    tree = descendants(proc.pid)
    assert assistant in tree and len(tree) >= 2
    if sig == signal.SIGINT:  # Ctrl-C reaches the whole foreground process group
        os.killpg(proc.pid, sig)
    else:  # a scheduler's SIGTERM, or a kill, reaches fairseq-train only
        os.kill(proc.pid, sig)
    _finish(proc, lines, timeout=60)
    assert proc.returncode != 0
    deadline = time.monotonic() + 60  # a hang guard: they notice within seconds
    while any(map(running, tree)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in tree if running(pid)], "processes outlived fairseq-train"


def _fails_fast(args, *expected):
    start = time.monotonic()
    proc = run(args, check=False, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert time.monotonic() - start < 60
    for text in expected:
        assert text in out, out[-3000:]
    assert "| train_inner |" not in out


def test_missing_features_stop_before_training(train_data, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(train_data, data)
    for f in data.glob("train.src-tgt.autoassist.*"):
        f.unlink()
    _fails_fast(train_args(data, tmp_path / "ck"), "AutoAssist feature file not found",
                f"autoassist-features {data} --source-lang src --target-lang tgt --split train")


def test_features_of_other_data_stop_before_training(train_data, tiny_data, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(train_data, data)
    for f in tiny_data.glob("train.src-tgt.autoassist.*"):
        shutil.copy(f, data / f.name)
    _fails_fast(train_args(data, tmp_path / "ck"), "rows but the dataset has 2000 pairs",
                "rebuild it with: autoassist-features")


def test_out_of_range_option_names_the_flag(tiny_data, tmp_path):
    _fails_fast(train_args(tiny_data, tmp_path, extra=["--assistant-lambda-max", "1.0"]),
                "--assistant-lambda-max=1.0 is out of range")


# -- kills at a chosen point (tests/kill_at.py): in a save, or in sync mode's training ---------

def _killed_at(point, data, save_dir, *extra):
    """A run of the tiny Boss in the deterministic mode, saving (after a validation) every 3
    updates, killed at *point*: ``(its output, the args to resume it)``."""
    args = train_args(data, save_dir, extra=[
        "--max-update", "6", "--save-interval-updates", "3", "--assistant-sync",
        "--assistant-warmup", "2", "--assistant-trace-dir", save_dir / "trace",
        "--log-interval", "1", *extra])
    proc = run([sys.executable, REPO / "tests" / "kill_at.py", point, *args], check=False)
    output = proc.stdout + proc.stderr
    killed = signal.SIGTERM if point.endswith("SIGTERM") else signal.SIGKILL
    assert proc.returncode == -killed and f"KILL {point} " in output, output[-3000:]
    return output, args


def _trained_twice(save_dir):
    """Updates trained by the killed run and again by the resumed one: {update: [ids, ids]}."""
    seen = {}
    for _, update, ids in read_trace(save_dir / "trace"):
        seen.setdefault(update, []).append(ids)
    return {u: ids for u, ids in seen.items() if len(ids) > 1}


def _valid_losses(output):
    """``(update, validation loss)`` of fairseq's simple-format valid lines, in order."""
    found = re.findall(r"\| valid on 'valid' subset \| loss ([0-9.]+) .*\| num_updates (\d+)",
                       output)
    return [(int(update), float(loss)) for loss, update in found]


_TIMES = ("wps", "ups", "wall", "train_wall", "aa_wait_s")


def _inner_records(output):
    """{update: train_inner fields but times}: the loss, the Assistant's statistics (aa_acc,
    aa_T, aa_lambda: its learned state), the shares accepted and the run's token counts."""
    return {int(r["num_updates"]): {k: v for k, v in r.items() if k not in _TIMES}
            for r in log_records(output)}


def test_a_kill_in_the_first_write_of_a_save_resumes_exactly_from_the_save_before(tiny_data,
                                                                                 tmp_path):
    """Issue 48: SIGKILL while fairseq writes the save after update 6's validation (its first
    file, checkpoint_1_6.pt.tmp: written whole, then renamed). checkpoint_last.pt is the
    save of update 3, the Assistant's state inside the same file: the resume goes on from
    it, and trains updates 4-6 as the killed run did, to the same validation loss."""
    save_dir = tmp_path / "ckpt"
    output, args = _killed_at("write:2", tiny_data, save_dir)
    assert f"KILL write:2 {save_dir}/checkpoint_1_6.pt.tmp" in output
    proc = run(args)
    resumed = proc.stdout + proc.stderr
    assert f"Loaded checkpoint {save_dir}/checkpoint_last.pt (epoch 1 @ 3 updates)" in resumed
    assert "which this run resumes from, is older" not in resumed  # a .tmp is no save
    assert sorted(_trained_twice(save_dir)) == [3, 4, 5]
    assert all(a == b for a, b in _trained_twice(save_dir).values())
    killed, again = _inner_records(output), _inner_records(resumed)
    assert sorted(again) == [4, 5, 6] and all(killed[u] == again[u] for u in again), \
        (killed, again)
    before, after = _valid_losses(output), _valid_losses(resumed)
    assert [u for u, _ in before] == [3, 6] and [u for u, _ in after] == [6], (before, after)
    assert before[1] == after[0]


def test_a_kill_in_the_copy_to_checkpoint_last_names_the_whole_checkpoint_to_resume_from(
        tiny_data, tmp_path):
    """SIGKILL while fairseq copies the save of update 3 to checkpoint_last.pt (in place, not
    atomic): the resume stops before training, naming the cut file and the newest whole
    checkpoint beside it; resumed from that one, the run goes on from update 3."""
    save_dir = tmp_path / "ckpt"
    _, args = _killed_at("copy:checkpoint_last.pt:1", tiny_data, save_dir)
    proc = run(args, check=False)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "| train_inner |" not in output
    assert f"{save_dir}/checkpoint_last.pt is damaged (" in output, output[-3000:]
    best = save_dir / "checkpoint_best.pt"
    assert f"the newest whole one beside it is {best} (" in output, output[-3000:]
    assert f"resume with --restore-file {best};" in output
    proc = run(args + ["--restore-file", best])
    assert f"Loaded checkpoint {best} (epoch 1 @ 3 updates)" in proc.stdout + proc.stderr
    assert [u for u, _ in _valid_losses(proc.stdout)] == [6]


def test_a_kill_in_a_copy_before_checkpoint_last_warns_of_the_newer_save(tiny_data, tmp_path):
    """SIGKILL while fairseq copies the save of update 6 to checkpoint_best.pt, after its
    first file and before checkpoint_last.pt: the resume goes on from checkpoint_last.pt
    (update 3), warning that a newer whole checkpoint and a damaged one lie beside it."""
    save_dir = tmp_path / "ckpt"
    _, args = _killed_at("copy:checkpoint_best.pt:2", tiny_data, save_dir)
    proc = run(args)
    output = proc.stdout + proc.stderr
    assert f"Loaded checkpoint {save_dir}/checkpoint_last.pt (epoch 1 @ 3 updates)" in output
    warning = next((line for line in output.splitlines()
                    if "which this run resumes from, is older" in line), "")
    assert f"{save_dir}/checkpoint_1_6.pt, whole" in warning, output[-3000:]
    assert f"{save_dir}/checkpoint_best.pt, which is damaged (" in warning
    assert f"resume with --restore-file {save_dir}/checkpoint_1_6.pt" in warning
    assert "remove the damaged files" in warning


def test_sigterm_in_sync_mode_stops_at_once_and_the_last_save_resumes_exactly(tiny_data,
                                                                             tmp_path):
    """Issue 48: SIGTERM (a scheduler's) to a run in the deterministic mode, two updates
    after a save, with a data loader process: fairseq-train ends by the signal at once (no
    traceback, nothing written: fairseq has no handler), its data loader ends with it, and
    the resume from the save trains those two updates again to the same losses."""
    save_dir = tmp_path / "ckpt"
    output, args = _killed_at("update:5:SIGTERM", tiny_data, save_dir, "--num-workers", "1")
    assert "Traceback" not in output, output[-3000:]
    kids = [int(pid) for pid in output.split("CHILDREN", 1)[1].split("\n", 1)[0].split()]
    assert kids, "no data loader process"
    deadline = time.monotonic() + 30  # a safety net: the loader notices its parent is gone
    while any(map(running, kids)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(map(running, kids)), "the data loader outlived fairseq-train"
    proc = run(args)
    resumed = proc.stdout + proc.stderr
    assert f"Loaded checkpoint {save_dir}/checkpoint_last.pt (epoch 1 @ 3 updates)" in resumed
    assert sorted(_trained_twice(save_dir)) == [3, 4]
    assert all(a == b for a, b in _trained_twice(save_dir).values())
    before, after = _inner_records(output), _inner_records(resumed)
    assert sorted(before) == [1, 2, 3, 4, 5] and sorted(after) == [4, 5, 6]
    assert before[4] == after[4] and before[5] == after[5], (before, after)
