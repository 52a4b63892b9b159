"""The Boss -> Assistant transport under stalls: a state reply holds every loss sent before
the request (or counts it dropped), and a full outbox drops the oldest loss, never a
control message. The stalls are made deterministic by slowing or holding the writes of
loss messages in the Boss's process."""

import threading
import time
from multiprocessing import connection

import numpy as np
import pytest

from autoassist_fairseq.transport.local_source import LocalSource
from autoassist_fairseq.transport.process import AssistantProcess

HANG_GUARD = 60  # seconds a test waits for what takes milliseconds (not the behaviour asserted)


class RecordingAssistant:
    """Stands in for the Assistant: remembers the ids it learned from, in order."""

    stats = {}

    def __init__(self):
        self.learned = []

    def begin_pass(self, data_pass):
        pass

    def learn(self, ids, losses):
        self.learned += np.asarray(ids).tolist()

    def accept_probability(self, ids):
        return np.ones(len(ids))

    def state_dict(self):
        return {"learned": list(self.learned)}


class IdleGenerator:
    data_pass = 0

    def begin(self, msg):
        pass

    def next_window(self, accept_fn):
        return None


@pytest.fixture
def hold_losses(monkeypatch):
    """Every write of a loss message in this process first runs ``hook()``."""
    hooks = []
    real = connection.Connection._send_bytes

    def send_bytes(self, buf):
        if b"LossMsg" in bytes(buf[:400]) and hooks:
            hooks[0]()
        return real(self, buf)

    monkeypatch.setattr(connection.Connection, "_send_bytes", send_bytes)
    return hooks


def test_a_state_reply_holds_every_loss_sent_before_the_request(hold_losses):
    """Each loss message takes 20 ms to write (a busy pipe): the request, sent at once
    after them, is still answered only after all 20 were learned."""
    hold_losses.append(lambda: time.sleep(0.02))
    proc = AssistantProcess(RecordingAssistant, IdleGenerator, loss_queue_size=100)
    try:
        for i in range(20):
            proc.send_losses(np.array([i]), np.array([1.0]))
        state = proc.request_state()
    finally:
        proc.shutdown()
    assert proc.dropped_losses == 0
    assert state["assistant"]["learned"] == list(range(20))
    assert state["stats"]["loss_msgs"] == 20


def test_a_full_queue_drops_the_oldest_loss_and_never_a_request(hold_losses):
    """The first loss message is stuck in the write (a stalled Assistant) while nine more
    are sent to a queue of 3: the six oldest waiting ones are dropped, the newest three
    and the state request that follows them go through."""
    entered, release = threading.Event(), threading.Event()

    def stall():
        entered.set()
        release.wait(HANG_GUARD)

    hold_losses.append(stall)
    proc = AssistantProcess(RecordingAssistant, IdleGenerator, loss_queue_size=3)
    try:
        proc.send_losses(np.array([0]), np.array([1.0]))
        assert entered.wait(HANG_GUARD)
        hold_losses.clear()
        sender = threading.Thread(target=lambda: [
            proc.send_losses(np.array([i]), np.array([1.0])) for i in range(1, 10)])
        sender.start()
        sender.join(HANG_GUARD)  # the write stays stuck meanwhile: a blocking send never ends
        assert not sender.is_alive(), "send_losses blocked behind the stuck write"
        assert proc.dropped_losses == 6
        release.set()
        state = proc.request_state()
    finally:
        release.set()
        proc.shutdown()
    assert state["assistant"]["learned"] == [0, 7, 8, 9]


class LoadingAssistant(RecordingAssistant):
    def load_state_dict(self, state):
        self.learned = list(state["learned"])


def test_the_held_losses_of_a_loaded_state_are_never_dropped(hold_losses):
    """Issue 48, item 8. A state saved in --assistant-sync mode holds the losses received
    but not learned yet; loaded into the Assistant process while its pipe is stalled, all
    nine of them reach it, whatever the loss queue's size (3), and are not counted dropped."""
    entered, release = threading.Event(), threading.Event()

    def stall():
        entered.set()
        release.wait(HANG_GUARD)

    hold_losses.append(stall)
    proc = AssistantProcess(LoadingAssistant, IdleGenerator, loss_queue_size=3)
    try:
        proc.send_losses(np.array([0]), np.array([1.0]))  # stuck in the write
        assert entered.wait(HANG_GUARD)
        hold_losses.clear()
        held = [(seq, np.array([seq]), np.array([1.0])) for seq in range(1, 10)]
        proc.load({"learned": [], "held_losses": held})
        release.set()
        state = proc.request_state()
    finally:
        release.set()
        proc.shutdown()
    assert proc.dropped_losses == 0
    assert state["assistant"]["learned"] == list(range(1, 10))


@pytest.mark.parametrize("source", [AssistantProcess, LocalSource])
def test_both_sources_implement_the_window_source_protocol(source):
    """The client holds its source by WindowSource alone: each source has every member, and
    each method takes the protocol's arguments by name (a source that drifts fails here,
    not at the point of a run where the other source stands in)."""
    import inspect

    from autoassist_fairseq.transport.window_source import WindowSource

    members = [m for m in vars(WindowSource) if not m.startswith("_")]
    members += list(WindowSource.__annotations__)
    assert {"restart", "load", "send_losses", "next_window", "state", "check", "shutdown",
            "learns", "dropped_losses"} <= set(members)
    for name in members:
        assert hasattr(source, name), f"{source.__name__} lacks {name}"
        wanted = getattr(WindowSource, name, None)
        if not callable(wanted):
            continue
        params = [p for p in inspect.signature(wanted).parameters.values() if p.name != "self"]
        got = inspect.signature(getattr(source, name))
        got.bind(None, **{p.name: None for p in params})  # raises TypeError on a mismatch
