"""Faults and bad input: clear errors within seconds, no hang, no orphan process."""

import os
import shutil
import signal
import subprocess
import time

import pytest

from utils import BIN, children, run, running, train_args


def _restore_sigint():
    # a shell without job control starts background commands with SIGINT ignored, and
    # Python keeps that: restore the default so that Ctrl-C reaches fairseq-train however
    # the suite was started (seen: `nohup bash scripts/test.sh &` failed the Ctrl-C test)
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(args):
    args = [str(BIN / args[0])] + [str(a) for a in args[1:]]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, preexec_fn=_restore_sigint)


def _wait_for_training(proc, timeout=120):
    """Read the log until the first train_inner line; returns the Assistant's pid."""
    lines, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        lines.append(line)
        if "| train_inner |" in line:
            kids = children(proc.pid)
            assert len(kids) == 1, kids  # exactly one Assistant, nothing else
            return kids[0], lines
    proc.kill()
    pytest.fail("training did not start:\n" + "".join(lines[-50:]))


def _finish(proc, lines, timeout):
    start = time.monotonic()
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # a failing test leaves no training behind
        out, _ = proc.communicate()
        pytest.fail(f"fairseq-train still running {timeout}s later:\n"
                    + ("".join(lines) + out)[-3000:])
    return "".join(lines) + out, time.monotonic() - start


def _long_run(data, save_dir, *extra):
    return train_args(data, save_dir, extra=["--max-update", "100000", "--no-save", *extra])


# the default window: a window's message is larger than a pipe's buffer, so a killed
# Assistant may leave one half written (the case that used to hang the Boss)
DEFAULT_WINDOW = ("--assistant-window", "4096")


def test_killed_assistant_stops_the_run_with_the_cause(big_data, tmp_path):
    proc = _start(_long_run(big_data, tmp_path, *DEFAULT_WINDOW))
    assistant, lines = _wait_for_training(proc)
    os.kill(assistant, signal.SIGKILL)
    out, seconds = _finish(proc, lines, timeout=60)
    assert proc.returncode != 0
    assert seconds < 10
    assert "Assistant process died" in out and "killed by SIGKILL" in out
    assert "--assistant-fallback uniform" in out
    assert not running(assistant) and children(proc.pid) == []


# a dead Assistant under --assistant-fallback uniform: test_distributed.py's
# test_one_dead_assistant_stops_or_falls_back_on_every_rank[uniform]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_leaves_no_process(train_data, tmp_path, sig):
    proc = _start(_long_run(train_data, tmp_path))
    assistant, lines = _wait_for_training(proc)
    if sig == signal.SIGINT:  # Ctrl-C reaches the whole foreground process group
        os.killpg(proc.pid, sig)
    else:  # a scheduler's SIGTERM reaches fairseq-train only
        os.kill(proc.pid, sig)
    _finish(proc, lines, timeout=60)
    deadline = time.monotonic() + 5
    while running(assistant) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not running(assistant)


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

