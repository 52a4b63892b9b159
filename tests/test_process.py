import os
import signal
import time

import numpy as np
import pytest

from autoassist_fairseq.assistant.process import AssistantDied, AssistantProcess
from autoassist_fairseq.data.messages import BeginEpoch
from utils import running


class SlowAssistant:
    """Stands in for the Assistant: learning takes 0.2 s, everything is accepted."""

    stats = {}

    def learn(self, ids, losses):
        time.sleep(0.2)

    def accept_probability(self, ids):
        return np.ones(len(ids))

    def state_dict(self):
        return {"x": 1}


class OneWindowGenerator:
    def begin_epoch(self, epoch, num_batches):
        self.epoch, self.done = epoch, False

    def next_window(self, accept_fn):
        from autoassist_fairseq.data.messages import WindowPlan
        if self.done:
            return None
        self.done = True
        return WindowPlan(self.epoch, 0, [np.arange(3)], np.zeros(0, np.int64))


def _broken():
    raise RuntimeError("feature matrix exploded")


@pytest.fixture
def proc():
    p = AssistantProcess(SlowAssistant, OneWindowGenerator, loss_queue_size=2)
    yield p
    p.shutdown()


def test_windows_and_state_flow(proc):
    proc.send(BeginEpoch(1, None))
    window = proc.get(timeout=10)
    assert window.epoch == 1 and window.batches[0].tolist() == [0, 1, 2]
    assert proc.request_state()["assistant"] == {"x": 1}


def test_losses_never_block_and_oldest_are_dropped(proc):
    start = time.monotonic()
    for i in range(50):
        proc.send_losses(np.arange(4), np.ones(4))
    assert time.monotonic() - start < 1.0  # the Assistant needs 10 s for these
    assert proc.dropped_losses >= 30


def test_killed_assistant_is_an_error_within_seconds(proc):
    os.kill(proc.proc.pid, signal.SIGKILL)
    start = time.monotonic()
    with pytest.raises(AssistantDied, match="exited with code -9"):
        proc.get(timeout=60)
    assert time.monotonic() - start < 3


def test_exception_in_assistant_is_relayed():
    p = AssistantProcess(_broken, OneWindowGenerator)
    try:
        with pytest.raises(AssistantDied, match="feature matrix exploded"):
            p.get(timeout=30)
    finally:
        p.shutdown()


def test_shutdown_is_idempotent_and_leaves_no_process(proc):
    pid = proc.proc.pid
    proc.shutdown()
    proc.shutdown()
    assert not proc.proc.is_alive()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with pytest.raises(AssistantDied, match="shut down"):
        proc.get(timeout=1)


def test_child_exits_when_parent_dies(tmp_path):
    """A Boss killed with SIGKILL leaves no Assistant behind."""
    import subprocess
    import sys
    script = tmp_path / "boss.py"
    script.write_text(
        "import sys, time\n"
        f"sys.path.insert(0, {os.path.dirname(__file__)!r})\n"
        "from test_process import SlowAssistant, OneWindowGenerator\n"
        "from autoassist_fairseq.assistant.process import AssistantProcess\n"
        "p = AssistantProcess(SlowAssistant, OneWindowGenerator)\n"
        "print(p.proc.pid, flush=True)\n"
        "time.sleep(60)\n")
    boss = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    child = int(boss.stdout.readline())
    boss.kill()
    boss.wait()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if not running(child):
            break
        time.sleep(0.05)
    else:
        pytest.fail("the Assistant outlived its Boss")

