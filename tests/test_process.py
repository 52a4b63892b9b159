import functools
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import dataclass, field

import numpy as np
import pytest

from autoassist_fairseq.transport.messages import RestartStream
from autoassist_fairseq.transport.process import AssistantDied, AssistantProcess
from utils import running

TESTS = os.path.dirname(os.path.abspath(__file__))


def _child_env():
    """The environment of a child Python that imports this module: the tests' folder and the
    repository root first on its path, as pytest has them (rootdir, pytest.ini's pythonpath)."""
    path = [TESTS, os.path.dirname(TESTS), os.environ.get("PYTHONPATH")]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in path if p))


@dataclass
class Window:
    """Stands in for the generator's window plan: the process only forwards it."""

    data_pass: int
    window: int
    payload: np.ndarray
    accept_all: bool = False
    stats: dict = field(default_factory=dict)


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
    data_pass = 0

    def begin(self, msg):
        self.data_pass, self.done = msg.data_pass, False

    def next_window(self, accept_fn):
        if self.done:
            return None
        self.done = True
        return Window(self.data_pass, 0, np.arange(3))


def _broken():
    raise RuntimeError("feature matrix exploded")


@pytest.fixture
def proc():
    p = AssistantProcess(SlowAssistant, OneWindowGenerator, loss_queue_size=2)
    yield p
    p.shutdown()


def test_windows_and_state_flow(proc):
    proc.send(RestartStream(1))
    window = proc.get(timeout=10)
    assert window.data_pass == 1 and window.payload.tolist() == [0, 1, 2]
    assert proc.request_state()["assistant"] == {"x": 1}


def test_losses_never_block_and_oldest_are_dropped(proc):
    # each message (1.6 MB) is larger than a pipe's buffer, so the pipe holds no backlog:
    # while the Assistant sleeps 0.2 s per message, only the loss_queue_size = 2 newest wait
    ids, losses = np.arange(100_000), np.ones(100_000)
    start = time.monotonic()
    for i in range(50):
        proc.send_losses(ids, losses)
    assert time.monotonic() - start < 1.0  # the Assistant needs 10 s for these
    received = (time.monotonic() - start) / 0.2 + 2  # learned, plus one being read and sent
    assert proc.dropped_losses >= 50 - 2 - received


def test_killed_assistant_is_an_error_within_seconds(proc):
    os.kill(proc.proc.pid, signal.SIGKILL)
    start = time.monotonic()
    with pytest.raises(AssistantDied, match="killed by SIGKILL"):
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


@pytest.mark.parametrize("behind", [False, True])
def test_child_exits_when_parent_dies(tmp_path, behind):
    """A Boss killed with SIGKILL leaves no Assistant behind: idle, or while the Assistant is
    behind with a loss message half written into the full pipe (the child holds no copy of
    the pipe's write end, so its read of the half message ends instead of blocking)."""
    script = tmp_path / "boss.py"
    script.write_text(
        "import os, signal, sys, time\n"
        "import numpy as np\n"
        "from test_process import SlowAssistant, OneWindowGenerator\n"
        "from autoassist_fairseq.transport.process import AssistantProcess\n"
        "p = AssistantProcess(SlowAssistant, OneWindowGenerator)\n"
        "for _ in range(30 if sys.argv[1] == 'behind' else 0):  # ~11 KB each: more than the\n"
        "    p.send_losses(np.arange(700), np.random.rand(700))  # pipe holds while it learns\n"
        "time.sleep(1.0)\n"
        "print(p.proc.pid, flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n")
    boss = subprocess.Popen([sys.executable, str(script), "behind" if behind else "idle"],
                            stdout=subprocess.PIPE, text=True, env=_child_env())
    child = int(boss.stdout.readline())
    boss.wait()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if not running(child):
            break
        time.sleep(0.05)
    else:
        os.kill(child, signal.SIGKILL)
        pytest.fail("the Assistant outlived its Boss")


# -- large windows: the process dies with a message half written ---------------------------
PAYLOAD = 40_000  # float64 values: a window pickles to ~320 KB, five pipe buffers


def _payload(window, size=PAYLOAD):
    return np.random.default_rng(window).random(size)


class BigWindowGenerator:
    """Endless windows larger than a pipe's buffer; counts them in *produced* (shared)."""

    def __init__(self, produced, hold_pipe=None, size=PAYLOAD):
        self.produced, self.data_pass, self.size = produced, 0, size
        if hold_pipe is not None:
            # A process of the Assistant's own that outlives it and keeps the pipe open.
            pid = os.fork()
            if pid == 0:
                # Not the test's output pipes: only the window pipes stay open.
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(null, fd)
                time.sleep(60)
                os._exit(0)
            hold_pipe.value = pid

    def begin(self, msg):
        self.data_pass, self.window, self.accept_all = msg.data_pass, 0, msg.accept_all

    def next_window(self, accept_fn):
        w = Window(self.data_pass, self.window, _payload(self.window, self.size), self.accept_all)
        self.window += 1
        with self.produced.get_lock():
            self.produced.value += 1
        return w


class QuickAssistant:
    """Learns instantly; ``learn`` fails when the losses say so; reports what it saw."""

    def __init__(self):
        self.stats, self.learned, self.passes = {}, 0, []

    def learn(self, ids, losses):
        if np.isnan(losses).any():
            raise ValueError("feature matrix exploded while learning")
        self.learned += len(ids)

    def begin_pass(self, data_pass):
        self.passes.append(data_pass)

    def accept_probability(self, ids):
        return np.ones(len(ids))

    def state_dict(self):
        import threadpoolctl
        torch = sys.modules.get("torch")
        return {"learned": self.learned, "passes": list(self.passes),
                "blas_threads": [p["num_threads"] for p in threadpoolctl.threadpool_info()],
                "torch_threads": torch.get_num_threads() if torch else None}


def _start_big(boss_queue_size=2, hold_pipe=None, size=PAYLOAD):
    produced = mp.get_context("fork").Value("i", 0)
    proc = AssistantProcess(QuickAssistant, functools.partial(BigWindowGenerator, produced,
                                                              hold_pipe, size),
                            boss_queue_size=boss_queue_size)
    proc.send(RestartStream(1, accept_all=True))
    return proc, produced


def _wait_until_blocked(produced, timeout=30):
    """Until the process stops producing: every queue on the way to the Boss is full and
    the multiprocessing queue's feeder thread waits inside a half-written window."""
    deadline, last, since = time.monotonic() + timeout, -1, time.monotonic()
    while time.monotonic() < deadline:
        value = produced.value
        if value != last:
            last, since = value, time.monotonic()
        elif value >= 2 and time.monotonic() - since > 0.7:
            return value
        time.sleep(0.05)
    pytest.fail(f"the Assistant kept producing windows ({last}): the BossQueue is unbounded")


def _drain(proc, timeout=10):
    """``get`` until it raises, in a thread, so that a hang fails the test instead of
    hanging it. Returns the windows, the error and the seconds until the error."""
    out = {"windows": [], "error": None, "seconds": None}

    def take():
        start = time.monotonic()
        try:
            while True:
                out["windows"].append(proc.get(timeout=60))
                start = time.monotonic()
        except AssistantDied as err:
            out["error"], out["seconds"] = err, time.monotonic() - start

    thread = threading.Thread(target=take, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), "get() hung after the Assistant process died"
    return out


@pytest.fixture
def big():
    proc, produced = _start_big()
    yield proc, produced
    proc.shutdown()


def test_sigkill_mid_message_returns_complete_windows_then_raises(big):
    proc, produced = big
    made = _wait_until_blocked(produced)
    os.kill(proc.proc.pid, signal.SIGKILL)
    start = time.monotonic()
    out = _drain(proc)
    assert time.monotonic() - start < 10
    assert out["seconds"] < 10
    assert "killed by SIGKILL" in str(out["error"]) and "OOM" in str(out["error"])
    windows = out["windows"]
    # Every complete window arrives, in order and intact ...
    assert [w.window for w in windows] == list(range(len(windows)))
    assert all(np.array_equal(w.payload, _payload(w.window)) for w in windows)
    assert all(w.accept_all for w in windows)  # RestartStream reached the generator whole
    # ... at least the Boss's share, and not the two the process still held: the one it
    # was writing when killed, and the next one waiting for room.
    assert 2 <= len(windows) <= made - 2


def test_boss_queue_stays_bounded(big):
    proc, produced = big
    made = _wait_until_blocked(produced)
    # boss_queue_size=2 held by the Boss, one in the reader's hand, one in the pipe, one
    # waiting in the process.
    assert made <= 2 + 3
    first = proc.get(timeout=10)
    assert first.window == 0
    deadline = time.monotonic() + 10
    while produced.value == made and time.monotonic() < deadline:
        time.sleep(0.05)
    assert produced.value == made + 1  # one taken, one more made, no more


def test_small_windows_do_not_run_ahead_in_the_pipe():
    """Hundreds of small windows fit in a pipe's buffer: the process still makes no more
    than the Boss's queue, the reader's hand, one in flight and one waiting, so that its
    decisions stay as recent as with large windows."""
    proc, produced = _start_big(size=10)
    try:
        assert _wait_until_blocked(produced) <= 2 + 3
    finally:
        proc.shutdown()


def test_request_state_answered_while_window_queue_is_full(big):
    proc, produced = big
    _wait_until_blocked(produced)
    for _ in range(3):
        proc.send_losses(np.arange(5), np.ones(5))
    start = time.monotonic()
    state = proc.request_state()
    assert time.monotonic() - start < 5
    assert state["assistant"]["learned"] == 15 and state["stats"]["loss_msgs"] == 3


def test_exception_in_loop_is_relayed_past_full_window_queue(big):
    proc, produced = big
    _wait_until_blocked(produced)
    proc.send_losses(np.arange(2), np.array([1.0, np.nan]))
    out = _drain(proc)
    message = str(out["error"])
    assert "feature matrix exploded while learning" in message
    assert "Traceback" in message and "in learn" in message  # the child's own traceback
    assert len(out["windows"]) >= 2


def test_assistant_is_told_each_data_pass_once():
    class PassGenerator(OneWindowGenerator):
        """Two windows per data pass, passes following each other."""

        def begin(self, msg):
            self.data_pass, self.window = msg.data_pass, 0

        def next_window(self, accept_fn):
            w = Window(self.data_pass, self.window, np.arange(1))
            self.window += 1
            self.data_pass += self.window % 2 == 0
            return w

    p = AssistantProcess(QuickAssistant, PassGenerator, boss_queue_size=1)
    try:
        p.send(RestartStream(3))
        windows = [p.get(timeout=10) for _ in range(5)]
        assert [w.data_pass for w in windows] == [3, 3, 4, 4, 5]
        passes = p.request_state()["assistant"]["passes"]
        assert passes[:3] == [3, 4, 5] and passes == sorted(set(passes))
    finally:
        p.shutdown()


def test_child_blas_and_torch_run_single_threaded():
    import threadpoolctl
    import torch  # the Boss has it loaded; the forked child must limit it too
    boss_torch = torch.get_num_threads()
    boss_blas = [p["num_threads"] for p in threadpoolctl.threadpool_info()]
    p = AssistantProcess(QuickAssistant, OneWindowGenerator)
    try:
        state = p.request_state()["assistant"]
    finally:
        p.shutdown()
    assert state["blas_threads"] and set(state["blas_threads"]) == {1}
    assert state["torch_threads"] == 1
    assert torch.get_num_threads() == boss_torch  # the Boss keeps its own
    assert [p["num_threads"] for p in threadpoolctl.threadpool_info()] == boss_blas


def test_shutdown_after_death_mid_message_is_quick_and_clean(big):
    proc, produced = big
    _wait_until_blocked(produced)
    pid = proc.proc.pid
    os.kill(pid, signal.SIGKILL)
    start = time.monotonic()
    proc.shutdown()
    assert time.monotonic() - start < 5
    assert not running(pid)
    assert not [t for t in threading.enumerate() if t.name.startswith("autoassist-")]
    with pytest.raises(AssistantDied, match="shut down"):
        proc.get(timeout=1)


def _run_script(body, timeout=60):
    script = textwrap.dedent("""\
        import os, signal, sys, time
        from test_process import _start_big, _wait_until_blocked, _drain
        from autoassist_fairseq.transport.process import AssistantProcess
        """) + textwrap.dedent(body)
    start = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              timeout=timeout, env=_child_env())
    except subprocess.TimeoutExpired:
        pytest.fail(f"the Boss did not exit within {timeout}s: a thread blocks its exit")
    assert done.returncode == 0, done.stderr
    return done.stdout, time.monotonic() - start


def test_interpreter_exits_after_death_mid_message_and_forks_again():
    """No shutdown called: the exit hook and the daemon readers must not block; a later
    Assistant process still starts and works."""
    out, _ = _run_script("""
        proc, produced = _start_big()
        _wait_until_blocked(produced)
        os.kill(proc.proc.pid, signal.SIGKILL)
        time.sleep(0.5)
        again, produced = _start_big()
        print(again.get(timeout=30).window, flush=True)
        print(again.proc.pid, flush=True)
        """)
    first, pid = out.split()
    assert first == "0"
    assert not running(int(pid))  # the exit hook shut the second process down


def test_reader_stuck_on_half_message_never_blocks():
    """A process the Assistant started keeps the pipe open after the Assistant is killed
    mid-message: the reader thread stays blocked in the read, yet ``get`` raises, and
    ``shutdown`` and the interpreter's exit do not wait for it."""
    holder = None
    try:
        out, seconds = _run_script("""
            import multiprocessing as mp
            hold = mp.get_context("fork").Value("i", 0)
            proc, produced = _start_big(hold_pipe=hold)
            _wait_until_blocked(produced)
            print(hold.value, flush=True)
            os.kill(proc.proc.pid, signal.SIGKILL)
            out = _drain(proc)
            assert "killed by SIGKILL" in str(out["error"]), out
            print(round(out["seconds"], 3), flush=True)
            start = time.monotonic()
            proc.shutdown()
            print(round(time.monotonic() - start, 3), flush=True)
            """)
        holder, get_seconds, shutdown_seconds = out.split()
        holder = int(holder)
        assert running(holder), "the test lost its pipe holder: nothing was stuck"
        assert float(get_seconds) < 10 and float(shutdown_seconds) < 5
    finally:
        if holder:
            os.kill(holder, signal.SIGKILL)


def test_non_finite_losses_are_dropped_by_the_real_assistant(tmp_path):
    """A NaN or inf loss batch (fp16 overflow) reaches the process: the Assistant counts and
    drops it, and its threshold stays finite."""
    import scipy.sparse as sp

    from autoassist_fairseq.assistant import Assistant, AssistantHParams
    from autoassist_fairseq.features.store import FeatureStore

    rows = sp.random(50, 20, density=0.3, format="csr", random_state=0, dtype=np.float32)
    FeatureStore.save(str(tmp_path / "f"), rows, {})
    make = functools.partial(Assistant, FeatureStore.open(str(tmp_path / "f")),
                             AssistantHParams())
    p = AssistantProcess(make, OneWindowGenerator)
    try:
        p.send_losses(np.arange(4), np.array([1.0, 2.0, 3.0, 4.0]))
        p.send_losses(np.arange(4, 8), np.array([np.nan, np.inf, -np.inf, np.nan]))
        p.send_losses(np.arange(8, 12), np.array([2.0, np.nan, 3.0, 5.0]))
        stats = p.request_state()["stats"]
    finally:
        p.shutdown()
    assert stats["nonfinite"] == 5
    assert np.isfinite(stats["threshold"]) and stats["loss_batches"] == 2
