"""Two CPU workers with gloo: each has its own shard and Assistant, and the same updates;
an interrupted epoch resumes every rank's plan exactly; a dead Assistant stops every rank.

The resume tests start each rank's fairseq-train warm (utils.run_cpu_workers); the tests
that kill a rank or its Assistant read the launcher's process tree and start them cold."""

import os
import re
import signal
import subprocess
import sys
import time

import pytest
import torch

from utils import (REPO, children, cpu_workers, descendants, read_trace, run_cpu_workers,
                   running, train_args)


def test_two_workers_finish_with_equal_updates_and_resume_mid_epoch_exactly(train_data, tmp_path):
    """Two ranks skipping different pairs train the same updates in every epoch, and rank 0
    saves both ranks' state; interrupted in the middle of epoch 2 and resumed, both train
    exactly the batches of the uninterrupted run: none repeated, none dropped. The default
    rule in the deterministic mode: each rank's Assistant decides from its learned state,
    which the checkpoint carries exactly."""
    def args(name, *extra):
        return train_args(train_data, tmp_path / name, extra=[
            "--max-epoch", "3", "--assistant-trace-dir", tmp_path / f"trace-{name}",
            "--assistant-sync", "--assistant-warmup", "5", *extra])

    out = run_cpu_workers(args("whole")).stdout
    assert "done training" in out
    ends = [int(u) for u in re.findall(r"\| train \| epoch 00\d .*num_updates (\d+)", out)]
    assert len(ends) == 3, out[-3000:]
    state = torch.load(tmp_path / "whole" / "checkpoint_last.pt", weights_only=False)
    saved = state["extra_state"]["train_iterator"]["autoassist"]
    assert saved["batches_done"] == ends[-1]
    # the checkpoint's totals are the run's, over both ranks: what the log shows
    assert saved["totals"]["boss_tokens"] == _last_value(out, "aa_boss_tok") > 0
    # rank 0 wrote both ranks' Assistants and batch plans, gathered at the epoch's end
    assert len(saved["ranks"]) == 2
    assert all(r["assistant"]["schedule"]["num_batches"] > 0 and r["stream"] is not None for r in saved["ranks"])
    expected = [read_trace(tmp_path / "trace-whole", rank) for rank in (0, 1)]
    for epoch in (1, 2, 3):  # equal updates on both ranks, though each skips its own pairs
        assert sum(1 for e, _, _ in expected[1] if e == epoch) == \
            sum(1 for e, _, _ in expected[0] if e == epoch)
    epoch1 = sum(1 for e, _, _ in expected[0] if e == 1)
    run_cpu_workers(args("part", "--max-update", str(epoch1 + 7)))
    saved = torch.load(tmp_path / "part" / "checkpoint_last.pt", weights_only=False)
    itr = saved["extra_state"]["train_iterator"]
    assert itr["epoch"] == 2 and itr["iterations_in_epoch"] == 7
    proc = run_cpu_workers(args("part"))
    assert "resuming epoch 2 at batch 7/" in proc.stdout
    for rank in (0, 1):
        got = read_trace(tmp_path / "trace-part", rank)
        assert [ids for _, _, ids in got] == [ids for _, _, ids in expected[rank]], rank
    # the run's cumulative counters go on from the checkpoint, each token counted once
    for key in ("aa_boss_tok", "aa_skip_tok", "aa_boss_padded_tok"):
        assert _last_value(proc.stdout, key) == pytest.approx(_last_value(out, key), abs=2), key


def test_two_workers_without_validation_resume_exactly(train_data, tmp_path):
    """Issue 48, item 4. With --disable-validation no validation gathers the ranks' states
    before a save: they are gathered after the last update's step, so rank 1's Assistant
    holds that update's losses, and a run stopped in the middle of epoch 2 and resumed
    trains exactly the uninterrupted run's batches on both ranks, with no warning that
    other workers' plans are older."""
    def args(name, *extra):
        return train_args(train_data, tmp_path / name, extra=[
            "--max-epoch", "2", "--assistant-trace-dir", tmp_path / f"trace-{name}",
            "--assistant-sync", "--assistant-warmup", "5", "--disable-validation", *extra])

    run_cpu_workers(args("whole"))
    expected = [read_trace(tmp_path / "trace-whole", rank) for rank in (0, 1)]
    epoch1 = sum(1 for e, _, _ in expected[0] if e == 1)
    out = run_cpu_workers(args("part", "--max-update", str(epoch1 + 7))).stdout
    saved = torch.load(tmp_path / "part" / "checkpoint_last.pt", weights_only=False)
    saved = saved["extra_state"]["train_iterator"]["autoassist"]
    for rank, entry in enumerate(saved["ranks"]):  # the losses of every batch trained
        learned = entry["assistant"]["schedule"]["num_batches"]
        held = len(entry["assistant"]["held_losses"])
        assert learned + held == saved["batches_done"] == epoch1 + 7, (rank, learned, held)
    proc = run_cpu_workers(args("part"))
    output = out + proc.stdout + proc.stderr
    assert "resuming epoch 2 at batch 7/" in proc.stdout
    assert "batch plans as of" not in output, output[-3000:]
    for rank in (0, 1):
        got = read_trace(tmp_path / "trace-part", rank)
        assert [ids for _, _, ids in got] == [ids for _, _, ids in expected[rank]], rank


def _last_value(output, key):
    return float(re.findall(rf"\| train \| epoch .*\| {key} ([0-9.e+]+)", output)[-1])


def _restore_sigint():
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("fallback", ["error", "uniform"])
def test_one_dead_assistant_stops_or_falls_back_on_every_rank(train_data, tmp_path, fallback):
    """Rank 1's Assistant killed: with `error` every rank stops at the same update (the
    last update each rank trained, in its trace), rank 1 naming the cause and rank 0 the
    other worker, neither by a failed collective; with `uniform` both go on to the end."""
    args = cpu_workers(train_args(train_data, tmp_path, extra=[
        "--max-update", "60" if fallback == "uniform" else "100000", "--no-save",
        "--assistant-fallback", fallback, "--assistant-trace-dir", tmp_path / "trace"]))
    proc = subprocess.Popen([str(a) for a in args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            preexec_fn=_restore_sigint)
    lines, deadline = [], time.monotonic() + 180
    while time.monotonic() < deadline:
        lines.append(proc.stdout.readline())
        if "| train_inner |" in lines[-1]:
            break
    workers = children(proc.pid)
    assistants = [kid for w in workers for kid in children(w)]
    assert len(workers) == 2 and len(assistants) == 2, (workers, assistants)
    os.kill(assistants[1], signal.SIGKILL)  # one rank's Assistant only
    try:
        out, _ = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail("the workers did not end:\n" + "".join(lines)[-3000:])
    out = "".join(lines) + out
    if fallback == "error":
        assert proc.returncode != 0
        assert "killed by SIGKILL" in out and "--assistant-fallback uniform" in out
        # every rank stops with one line (no traceback) naming worker 1 and the cause (the
        # ranks exchange their causes at the update that stops them), none by a failed
        # collective; rank 0's line is there unless the launcher stopped it first
        expected = ("the Assistant of worker 1 failed, so every worker stops at this update: "
                    "the Assistant process died: it was killed by SIGKILL (the OOM killer?) "
                    "without a traceback")
        last, found = out.rstrip().splitlines()[-1], 0
        for rank in (0, 1):
            died = [line for line in out.splitlines() if line.startswith(
                f"[rank {rank}] [rank{rank}]: fairseq-train: error: ")]
            assert all(line.endswith(expected) for line in died), (rank, died, out[-3000:])
            assert died or f"rank {rank} was stopped by the launcher" in last, (rank, out[-3000:])
            found += len(died)
        assert found, out[-3000:]
        ranks = [line for line in out.splitlines() if line.startswith("[rank")]
        assert not [line for line in ranks if "by peer" in line], out[-3000:]
        assert "Traceback" not in out, out[-3000:]
        # each rank writes an update's trace before the step's all-reduce, after which both
        # stop: the last update traced is the one every rank stopped at
        last = [read_trace(tmp_path / "trace", rank)[-1][1] for rank in (0, 1)]
        assert last[0] == last[1], last
    else:
        assert proc.returncode == 0, out[-3000:]
        assert "continuing this run on uniform batches" in out
        assert "done training" in out and "num_updates 60" in out
    assert not any(running(pid) for pid in workers + assistants)


@pytest.mark.parametrize("failures, message", [
    ([None, "the Assistant process died: killed"],
     "the Assistant of worker 1 failed, so every worker stops at this update: the Assistant "
     "process died: killed"),
    (["it raised X", "it raised Y"],
     "the Assistants of workers 0, 1 failed, so every worker stops at this update: worker 0: "
     "it raised X; worker 1: it raised Y"),
])
def test_every_rank_names_the_failed_worker_and_its_cause(failures, message):
    """At the update where the summed failure flag stops every rank, the ranks exchange
    their causes: rank 0, whose own Assistant is well, names worker 1's failure, not "on
    another worker"."""
    from types import SimpleNamespace

    from autoassist_fairseq.tasks.batch_iterator import AutoAssistEpochBatchIterator
    from autoassist_fairseq.transport.client import AssistantClient
    from autoassist_fairseq.transport.process import AssistantDied

    client = AssistantClient.__new__(AssistantClient)
    client.failure = failures[0]  # rank 0's own
    rank0 = SimpleNamespace(num_shards=2, client=client, all_gather=lambda own: failures)
    with pytest.raises(AssistantDied) as err:
        AutoAssistEpochBatchIterator.stop_on_failure(rank0)
    assert str(err.value).startswith(message + "\n"), str(err.value)
    assert "--assistant-fallback uniform" in str(err.value)


def _rank_of(pid):
    with open(f"/proc/{pid}/cmdline") as f:
        argv = f.read().split("\0")
    return int(argv[argv.index("--distributed-rank") + 1])


def test_a_killed_worker_stops_the_other_with_the_cause_and_leaves_no_process(train_data,
                                                                             tmp_path):
    """Issue 48: `kill -9` of one of two workers (rank 1's fairseq-train, not its
    Assistant) in the middle of training. Rank 0 fails in its next collective (gloo:
    'Connection closed by peer', a traceback that does not say why); the launcher stops it
    at once and its last line names the rank that died first and the signal, though rank 0
    may end before the launcher looks. Every worker, Assistant and data loader ends."""
    args = cpu_workers(train_args(train_data, tmp_path, extra=[
        "--max-update", "100000", "--no-save", "--num-workers", "1"]))
    proc = subprocess.Popen([str(a) for a in args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            preexec_fn=_restore_sigint)
    lines, deadline = [], time.monotonic() + 180
    try:
        while time.monotonic() < deadline:
            lines.append(proc.stdout.readline())
            if "| train_inner |" in lines[-1] or not lines[-1]:
                break
        workers = {_rank_of(pid): pid for pid in children(proc.pid)}
        tree = descendants(proc.pid)
        assistants = [kid for w in workers.values() for kid in children(w)
                      if "autoassist-assistant" in open(f"/proc/{kid}/cmdline").read()]
        assert sorted(workers) == [0, 1] and len(assistants) == 2, (workers, tree, lines[-20:])
        assert len(tree) > 4  # the ranks' data loaders (--num-workers 1) too
        os.kill(workers[1], signal.SIGKILL)
        out, _ = proc.communicate(timeout=120)  # a safety net: the launcher stops rank 0 at once
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            for pid in children(proc.pid):
                os.killpg(pid, signal.SIGKILL)
    out = "".join(lines) + out
    assert proc.returncode == 128 + signal.SIGKILL, out[-3000:]
    last = out.rstrip().splitlines()[-1]
    assert last.startswith("[launcher] the run failed: rank 1 was killed by SIGKILL (kill -9, "
                           "or the kernel's out-of-memory killer"), out[-3000:]
    assert "after it, rank 0 " in last
    deadline = time.monotonic() + 60  # a hang guard: SIGKILLed processes end in the kernel's time
    while any(map(running, tree)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in tree if running(pid)], "processes outlived the run"


def test_the_launcher_blames_the_killed_worker_not_the_one_that_lost_it():
    """When one rank dies, the others fail in their next collective within milliseconds,
    often before the launcher looks again: the cause is the rank killed by a signal, not
    the lowest rank with an error. Rank 1 here connects to rank 0 and kills itself; rank 0
    exits with 1 as soon as the connection ends, as gloo's ranks do."""
    worker = (
        "import os, signal, socket, sys, time\n"
        "rank = int(sys.argv[sys.argv.index('--distributed-rank') + 1])\n"
        "port = int(sys.argv[sys.argv.index('--distributed-init-method') + 1].rsplit(':', 1)[1])\n"
        "if rank == 0:\n"
        "    server = socket.create_server(('127.0.0.1', port))\n"
        "    peer, _ = server.accept()\n"
        "    peer.recv(1)\n"
        "    sys.exit('Connection closed by peer')\n"
        "for _ in range(600):\n"
        "    try:\n"
        "        peer = socket.create_connection(('127.0.0.1', port)); break\n"
        "    except OSError:\n"
        "        time.sleep(0.05)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n")
    proc = subprocess.run([sys.executable, REPO / "scripts" / "launch_cpu_workers.py", "2", "--",
                           sys.executable, "-c", worker], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 128 + signal.SIGKILL, proc.stdout + proc.stderr
    last = proc.stdout.rstrip().splitlines()[-1]
    assert last.startswith("[launcher] the run failed: rank 1 was killed by SIGKILL"), proc.stdout
    assert "after it, rank 0 " in last


def test_the_plugin_destroys_a_gloo_process_group_before_the_interpreter_ends(tmp_path):
    """fairseq never destroys its process group; gloo's threads left to the interpreter's
    finalisation can abort a rank at exit. A handler registered before the plugin's import
    runs after the plugin's own: by then the group must be gone."""
    child = (
        "import atexit, torch.distributed as dist\n"
        "atexit.register(lambda: print('initialized at exit:', dist.is_initialized()))\n"
        "import fairseq\n"  # as fairseq-train --user-dir: fairseq, then the plugin
        "import autoassist_fairseq\n"
        f"dist.init_process_group('gloo', init_method='file://{tmp_path / 'rendezvous'}', "
        "rank=0, world_size=1)\n"
        "dist.all_reduce(__import__('torch').ones(1))\n")
    proc = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, cwd=REPO,
                          timeout=120, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "initialized at exit: False" in proc.stdout, proc.stdout + proc.stderr[-2000:]


def test_the_launcher_exits_as_a_shell_does_for_a_worker_ended_by_a_signal():
    """A worker killed by SIGKILL makes the launcher exit 137 (128 + 9), not Python's -9."""
    worker = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    proc = subprocess.run([sys.executable, REPO / "scripts" / "launch_cpu_workers.py", "2", "--",
                           sys.executable, "-c", worker], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 128 + signal.SIGKILL, proc.stdout + proc.stderr


def test_the_launcher_names_a_command_that_is_not_on_path():
    """A misspelt command, or fairseq-train without the environment activated: a clear
    error with the fix and exit 2, not Popen's FileNotFoundError traceback."""
    proc = subprocess.run([sys.executable, REPO / "scripts" / "launch_cpu_workers.py", "2", "--",
                           "fairseq-trian", "data-bin"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "command not found: fairseq-trian (not on PATH)" in proc.stderr
    assert "activate the environment" in proc.stderr and "Traceback" not in proc.stderr


def test_the_launcher_stops_the_started_workers_when_a_later_one_cannot_start(monkeypatch,
                                                                               capsys):
    """Rank 1 failing to start (here: out of processes) leaves no rank 0 running."""
    import errno

    from scripts_helpers import load_script

    launcher = load_script("launch_cpu_workers")
    started = []
    real_popen = subprocess.Popen

    def popen(cmd, **kwargs):
        if started:
            raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")
        started.append(real_popen(cmd, **kwargs))
        return started[-1]

    monkeypatch.setattr(launcher.subprocess, "Popen", popen)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        code = launcher.main(["2", "--", sys.executable, "-c", "import time; time.sleep(60)"])
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    assert code == 2
    assert len(started) == 1 and started[0].poll() is not None  # stopped and reaped
    err = capsys.readouterr().err
    assert "cannot start rank 1" in err and "stopping the 1 started before it" in err


@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux's")
def test_workers_end_when_the_launcher_is_killed_outright(tmp_path):
    """The workers run in sessions of their own: a launcher killed by SIGKILL (no handler
    runs) must still take them with it, or they train on, unseen, into the save folder."""
    pids = tmp_path / "pids"
    worker = f"echo $$ >> {pids}; exec sleep 60"  # the launcher's flags follow as $0, $1, ...
    launcher = subprocess.Popen([sys.executable, REPO / "scripts" / "launch_cpu_workers.py",
                                 "2", "--", "bash", "-c", worker],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    started = []
    try:
        deadline = time.monotonic() + 30
        while len(started) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
            started = [int(p) for p in pids.read_text().split()] if pids.exists() else []
        assert len(started) == 2
        launcher.kill()
        launcher.wait()
        deadline = time.monotonic() + 60  # a hang guard
        while any(map(running, started)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(map(running, started)), "workers outlived their killed launcher"
    finally:
        if launcher.poll() is None:
            launcher.kill()
        for pid in started:
            if running(pid):
                os.kill(pid, signal.SIGKILL)


def test_what_a_failed_worker_leaves_in_its_group_ends_with_the_launcher(tmp_path):
    """A worker killed outright leaves its children (data loaders) behind in its process
    group; the launcher ends the group, not only the worker."""
    pid_file = tmp_path / "child"
    worker = f"sleep 60 & echo $! > {pid_file}; sleep 0.5; exit 3"
    proc = subprocess.run([sys.executable, REPO / "scripts" / "launch_cpu_workers.py", "1",
                           "--", "bash", "-c", worker], capture_output=True, text=True,
                          timeout=60)
    child = int(pid_file.read_text())
    try:
        assert proc.returncode == 3
        deadline = time.monotonic() + 60  # a hang guard
        while running(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not running(child), "the worker's child outlived the launcher"
    finally:
        if running(child):
            os.kill(child, signal.SIGKILL)


def test_rank_states_are_gathered_over_fairseqs_data_parallel_group(monkeypatch):
    """The batch counts and rank states go over fairseq's data-parallel group (under model
    parallelism not every process of the default group holds a data shard), not the
    default group."""
    import torch.distributed as dist
    from fairseq.distributed import utils as distributed_utils

    from autoassist_fairseq.tasks import rank_states

    group, calls = object(), []
    monkeypatch.setattr(distributed_utils, "get_data_parallel_group", lambda: group)
    monkeypatch.setattr(dist, "get_world_size", lambda g=None: 3 if g is group else 5)

    def all_gather_object(out, obj, group=None):
        calls.append(group)
        out[:] = [obj] * len(out)

    monkeypatch.setattr(dist, "all_gather_object", all_gather_object)
    assert rank_states.all_gather_data_parallel({"rank": 0}) == [{"rank": 0}] * 3
    assert calls == [group]
