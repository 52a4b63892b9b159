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


# a hang guard: how long a test waits for something that takes milliseconds (never the
# behaviour asserted)
HANG_GUARD = 60


def wait_for(condition, what, timeout=HANG_GUARD):
    """Poll *condition* until it holds; fail the test if it does not within *timeout* s."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout} s")
        time.sleep(0.01)


class GatedAssistant:
    """Stands in for the Assistant: everything is accepted; learning waits until *gate* (an
    event shared with the test through the fork) is set, as a busy Assistant would."""

    stats = {}

    def __init__(self, gate=None):
        self.gate = gate

    def begin_pass(self, data_pass):
        pass

    def learn(self, ids, losses):
        if self.gate is not None and not self.gate.wait(HANG_GUARD):
            raise TimeoutError("the test never let the Assistant learn")

    def accept_probability(self, ids):
        return np.ones(len(ids))

    def state_dict(self):
        return {"x": 1}


class BossBoundAssistant(GatedAssistant):
    """Sets *learning* at its first loss message and learns it only once its Boss (the
    process that started it) is gone: an Assistant that is behind when the Boss dies."""

    def __init__(self, learning):
        super().__init__()
        self.learning, self.boss = learning, os.getppid()

    def learn(self, ids, losses):
        self.learning.set()
        wait_for(lambda: os.getppid() != self.boss, "the Boss never died")


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
def gate():
    """Lets the fixture's Assistant learn once set (and at the test's end)."""
    return mp.get_context("fork").Event()


@pytest.fixture
def proc(gate):
    p = AssistantProcess(functools.partial(GatedAssistant, gate), OneWindowGenerator,
                         loss_queue_size=2)
    yield p
    gate.set()
    p.shutdown()


def test_windows_and_state_flow(proc):
    proc.send(RestartStream(1))
    window = proc.get(timeout=10)
    assert window.data_pass == 1 and window.payload.tolist() == [0, 1, 2]
    assert proc.request_state()["assistant"] == {"x": 1}


def test_losses_never_block_and_oldest_are_dropped(proc, gate):
    """While the Assistant is held in its first learn, 50 loss messages are sent: each
    (1.6 MB) is larger than a pipe's buffer, so besides the one it holds the pipe takes
    part of one more, and only the loss_queue_size = 2 newest wait; the others are dropped.
    Every message not dropped reaches the Assistant once it learns again."""
    ids, losses = np.arange(100_000), np.ones(100_000)
    sender = threading.Thread(target=lambda: [proc.send_losses(ids, losses) for _ in range(50)])
    sender.start()
    sender.join(HANG_GUARD)
    assert not sender.is_alive(), "send_losses blocked while the Assistant was busy"
    assert proc.dropped_losses >= 50 - 1 - 1 - 2  # held, half in the pipe, two waiting
    gate.set()
    assert proc.request_state()["stats"]["loss_msgs"] == 50 - proc.dropped_losses


def test_killed_assistant_is_an_error_naming_the_signal_not_a_timeout(proc):
    """The wait for a window sees the death (the liveness check), not its own timeout,
    which would say "sent nothing for 60s"."""
    os.kill(proc.proc.pid, signal.SIGKILL)
    with pytest.raises(AssistantDied, match="killed by SIGKILL") as err:
        proc.get(timeout=HANG_GUARD)
    assert "sent nothing" not in str(err.value)


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
    """A Boss killed with SIGKILL leaves no Assistant behind: idle (its loop running), or
    while the Assistant is behind, learning a loss message, with the next one half written
    into the full pipe (the child holds no copy of the pipe's write end, so its read of the
    half message ends instead of blocking)."""
    script = tmp_path / "boss.py"
    script.write_text(textwrap.dedent("""\
        import functools, multiprocessing, os, signal, sys
        import numpy as np
        from test_process import BossBoundAssistant, OneWindowGenerator, wait_for
        from autoassist_fairseq.transport.process import AssistantProcess
        learning = multiprocessing.get_context("fork").Event()
        p = AssistantProcess(functools.partial(BossBoundAssistant, learning), OneWindowGenerator)
        if sys.argv[1] == "behind":
            for _ in range(2):  # 1.6 MB each: more than the pipe holds
                p.send_losses(np.arange(100_000), np.random.rand(100_000))
            assert learning.wait(60)  # the first one read whole, the Assistant learns it
            # the second one taken by the writer, which cannot finish it
            wait_for(lambda: p._sender._in_flight and len(p._sender) == 1, "the second write")
        else:
            p.request_state()  # its loop answers
        print(p.proc.pid, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """))
    boss = subprocess.Popen([sys.executable, str(script), "behind" if behind else "idle"],
                            stdout=subprocess.PIPE, text=True, env=_child_env())
    child = int(boss.stdout.readline())
    boss.wait()
    try:
        wait_for(lambda: not running(child), "the Assistant outlived its Boss")
    finally:
        if running(child):
            os.kill(child, signal.SIGKILL)


# -- large windows: the process dies with a message half written ---------------------------
PAYLOAD = 40_000  # float64 values: a window pickles to ~320 KB, five pipe buffers
BOSS_QUEUE = 2  # the windows the Boss holds (_start_big's boss_queue_size)
# windows made before the process must wait for the Boss: the Boss's queue, one in the
# reader thread's hand, one in the pipe (WINDOWS_IN_FLIGHT), one waiting in the process
HELD = BOSS_QUEUE + 3


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


def _start_big(boss_queue_size=BOSS_QUEUE, hold_pipe=None, size=PAYLOAD):
    produced = mp.get_context("fork").Value("i", 0)
    proc = AssistantProcess(QuickAssistant, functools.partial(BigWindowGenerator, produced,
                                                              hold_pipe, size),
                            boss_queue_size=boss_queue_size)
    proc.send(RestartStream(1, accept_all=True))
    return proc, produced


def _wait_until_made(produced, count=HELD):
    """Until the process has made *count* windows; then each queue on the way to the Boss
    is full (from HELD on: the window in the pipe is half written where it is larger than
    the pipe's buffer). Returns the count made."""
    wait_for(lambda: produced.value >= count, f"{count} windows made ({produced.value} were)")
    return produced.value


def _after_a_turn(proc):
    """Once the process has answered two state requests, sent after this call: it has gone
    through its loop, where it makes and hands over windows, since the call."""
    proc.request_state()
    proc.request_state()


def _drain(proc):
    """``get`` until it raises, in a thread, so that a hang fails the test instead of
    hanging it. Returns the windows and the error."""
    out = {"windows": [], "error": None}

    def take():
        try:
            while True:
                out["windows"].append(proc.get(timeout=HANG_GUARD))
        except AssistantDied as err:
            out["error"] = err

    thread = threading.Thread(target=take, daemon=True)
    thread.start()
    thread.join(2 * HANG_GUARD)  # get() ends by its own timeout first: "sent nothing"
    assert not thread.is_alive(), "get() hung after the Assistant process died"
    return out


@pytest.fixture
def big():
    proc, produced = _start_big()
    yield proc, produced
    proc.shutdown()


def test_sigkill_mid_message_returns_complete_windows_then_raises(big):
    proc, produced = big
    made = _wait_until_made(produced)
    os.kill(proc.proc.pid, signal.SIGKILL)
    out = _drain(proc)
    assert "killed by SIGKILL" in str(out["error"]) and "OOM" in str(out["error"])
    assert "sent nothing" not in str(out["error"])  # the death seen, not get()'s timeout
    windows = out["windows"]
    # Every complete window arrives, in order and intact ...
    assert [w.window for w in windows] == list(range(len(windows)))
    assert all(np.array_equal(w.payload, _payload(w.window)) for w in windows)
    assert all(w.accept_all for w in windows)  # RestartStream reached the generator whole
    # ... the Boss's share and the reader's, and not the two the process still held: the
    # one it was writing when killed, and the next one waiting for room.
    assert made == HELD and len(windows) == BOSS_QUEUE + 1 == made - 2


def test_boss_queue_stays_bounded(big):
    proc, produced = big
    made = _wait_until_made(produced)
    _after_a_turn(proc)
    # boss_queue_size=2 held by the Boss, one in the reader's hand, one in the pipe, one
    # waiting in the process: no more, however long the Boss takes none
    assert made == produced.value == HELD
    first = proc.get(timeout=HANG_GUARD)
    assert first.window == 0
    _wait_until_made(produced, HELD + 1)
    _after_a_turn(proc)
    assert produced.value == HELD + 1  # one taken, one more made, no more


def test_small_windows_do_not_run_ahead_in_the_pipe():
    """Hundreds of small windows fit in a pipe's buffer: the process still makes no more
    than the Boss's queue, the reader's hand, one in flight and one waiting, so that its
    decisions stay as recent as with large windows."""
    proc, produced = _start_big(size=10)
    try:
        _wait_until_made(produced)
        _after_a_turn(proc)
        assert produced.value == HELD
    finally:
        proc.shutdown()


def test_request_state_answered_while_window_queue_is_full(big):
    """The reply does not wait behind the windows the Boss has not taken (a wait would end
    in request_state's own timeout, an AssistantDied)."""
    proc, produced = big
    _wait_until_made(produced)
    for _ in range(3):
        proc.send_losses(np.arange(5), np.ones(5))
    state = proc.request_state()
    assert state["assistant"]["learned"] == 15 and state["stats"]["loss_msgs"] == 3
    assert produced.value == HELD  # the windows were still waiting


def test_exception_in_loop_is_relayed_past_full_window_queue(big):
    proc, produced = big
    _wait_until_made(produced)
    proc.send_losses(np.arange(2), np.array([1.0, np.nan]))
    out = _drain(proc)
    message = str(out["error"])
    assert "feature matrix exploded while learning" in message
    assert "Traceback" in message and "in learn" in message  # the child's own traceback
    assert len(out["windows"]) >= BOSS_QUEUE + 1  # the Boss's and the reader's


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


def test_shutdown_after_death_mid_message_ends_every_thread_and_the_process(big):
    proc, produced = big
    _wait_until_made(produced)
    pid = proc.proc.pid
    os.kill(pid, signal.SIGKILL)
    proc.shutdown()
    assert not running(pid)
    assert not [t for t in threading.enumerate() if t.name.startswith("autoassist-")]
    with pytest.raises(AssistantDied, match="shut down"):
        proc.get(timeout=1)


def _run_script(body, timeout=60):
    script = textwrap.dedent("""\
        import os, signal, sys, time
        from test_process import _start_big, _wait_until_made, _drain
        from autoassist_fairseq.transport.process import AssistantProcess
        """) + textwrap.dedent(body)
    try:
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              timeout=timeout, env=_child_env())
    except subprocess.TimeoutExpired:
        pytest.fail(f"the Boss did not exit within {timeout}s: a thread blocks its exit")
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_interpreter_exits_after_death_mid_message_and_forks_again():
    """No shutdown called: the exit hook and the daemon readers must not block; a later
    Assistant process still starts and works."""
    out = _run_script("""
        proc, produced = _start_big()
        _wait_until_made(produced)
        os.kill(proc.proc.pid, signal.SIGKILL)
        proc.proc.join(60)  # dead and reaped; its readers may still be in a read
        assert proc.proc.exitcode == -signal.SIGKILL
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
        out = _run_script("""
            import multiprocessing as mp
            hold = mp.get_context("fork").Value("i", 0)
            proc, produced = _start_big(hold_pipe=hold)
            _wait_until_made(produced)
            print(hold.value, flush=True)
            os.kill(proc.proc.pid, signal.SIGKILL)
            out = _drain(proc)
            # the death, after DRAIN_GRACE, not get()'s own timeout ("sent nothing")
            assert "killed by SIGKILL" in str(out["error"]), out
            proc.shutdown()
            print(proc._window_reader.is_alive(), flush=True)
            """)
        holder, stuck = out.split()
        holder = int(holder)
        assert running(holder), "the test lost its pipe holder: nothing was stuck"
        assert stuck == "True"  # the reader is still in its read, and nothing waited for it
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


class OddSkippingAssistant:
    """Stands in for the Assistant: accepts odd ids with probability 0.2, the others always."""

    stats = {"threshold": 1.0, "lambda": 0.5, "accuracy": 0.5, "chance": 0.5, "loss_batches": 0}

    def begin_pass(self, data_pass):
        pass

    def learn(self, ids, losses):
        pass

    def accept_probability(self, ids):
        return np.where(ids % 2 == 1, 0.2, 1.0)

    def state_dict(self):
        return {}


def _stopped(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "T"


@pytest.mark.parametrize("fallback", ["error", "uniform"])
def test_a_hung_but_alive_assistant_is_a_failure_after_the_reply_timeout(fallback,
                                                                        monkeypatch):
    """An Assistant process that lives but sends nothing (stopped with SIGSTOP here, as a
    deadlock or a starved CPU would leave it) passes the liveness check; once the Boss has
    trained the windows it sent, its wait for the next one ends after the reply timeout
    (REPLY_TIMEOUT, 120 s; 1 s here) as a failed Assistant: `error` stops with the cause and
    the fix, `uniform` goes on with every pair accepted. The stopped process is ended."""
    from autoassist_fairseq.data.batch_generator import BatchGenerator
    from autoassist_fairseq.data.batch_stream import BatchStream
    from autoassist_fairseq.transport import process as process_module
    from autoassist_fairseq.transport.client import AssistantClient

    monkeypatch.setattr(AssistantProcess, "next_window", lambda self: self.get(timeout=1.0))
    monkeypatch.setattr(process_module, "JOIN_TIMEOUT", 0.5)  # STOP unread: SIGKILL sooner
    rng = np.random.default_rng(0)
    sizes = rng.integers(3, 30, 2000), rng.integers(3, 30, 2000)

    def generator():
        return BatchGenerator(np.arange(2000), *sizes, max_tokens=600, window_size=300, seed=3)

    gen = generator()
    stream = BatchStream(gen)
    client = AssistantClient(lambda: AssistantProcess(OddSkippingAssistant, generator,
                                                      boss_queue_size=1),
                             gen, stream, fallback=fallback)
    client.start(first_pass=1)
    pid = client.source.proc.pid
    try:
        def train():  # the Boss: take a batch, report its losses
            batch = stream.next_batch(client.next_window)
            client.send_losses(batch.ids, np.ones(len(batch.ids)), batch.seq)
            return batch

        trained = [train() for _ in range(5)]
        os.kill(pid, signal.SIGSTOP)
        wait_for(lambda: _stopped(pid), "SIGSTOP")
        client.source.check()  # alive: no failure
        assert not client.fell_back
        if fallback == "error":
            with pytest.raises(AssistantDied, match=r"sent nothing for 1s \(it may be stuck or "
                                                    r"starved of CPU\)") as err:
                for _ in range(200):
                    train()
            assert "--assistant-fallback uniform" in str(err.value)
            client.shutdown()
        else:
            trained += [train() for _ in range(200)]
            assert client.fell_back
            assert [b.seq for b in trained] == list(range(len(trained)))  # none lost
            first = np.concatenate([b.ids for b in trained[:5]])
            late = np.concatenate([b.ids for b in trained[-60:]])
            assert np.mean(first % 2 == 1) < 0.4 < np.mean(late % 2 == 1)  # uniform now
        assert not running(pid)
    finally:
        if running(pid):
            os.kill(pid, signal.SIGKILL)
        client.shutdown()
