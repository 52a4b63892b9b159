"""``AssistantProcess``: one Assistant per Boss worker, in its own CPU process.

The Boss talks to it through one pipe per direction (:mod:`.channel`): losses and control
messages share one ordered pipe to the process, so a state request is read only after
every loss sent before it, and the reply holds all of them that were not dropped. The
Boss never waits on the Assistant's learning: a sender thread writes its outbox, which
drops the oldest waiting loss when ``loss_queue_size`` of them wait; control messages are
never dropped. Every wait for a window or a reply re-checks that the process is alive, so
a dead Assistant turns into an error within about a second instead of a hang.

A window pickles to far more than a pipe holds, so the process may die halfway through
writing one. Reads from the process therefore happen in daemon threads, one per inbound
pipe, that move complete messages into local queues; the Boss waits only on those. The
parent closes its copy of each inbound pipe's write end (and the child's read end of the
outbound pipe), so a read reports the pipe's end (``EOFError``) and a write fails
(``BrokenPipeError``) once the process is gone, even mid-message.
``shutdown`` is idempotent and also runs at interpreter exit and from ``__del__``.

The process is forked (it shares the parent's imports and memory maps; spawning would
import torch and fairseq again and pickle the builders' arrays). The fork happens while
the Boss runs threads (torch's, a DataLoader's, gloo's, and with ``--data a:b`` the
previous Assistant's readers): the child uses none of them, nor any lock they may hold.
docs/design.md ("Processes") says why that is safe.
"""

import atexit
import itertools
import logging
import multiprocessing as mp
import os
import queue
import signal
import threading
import time
import weakref

from . import worker
from .channel import Sender, SenderClosed, start_reader
from .messages import (DRAIN_GRACE, JOIN_TIMEOUT, POLL_INTERVAL, REPLY_TIMEOUT, STOP,
                       RestartStream, LoadState, LossMsg, StateRequest)

logger = logging.getLogger(__name__)


class AssistantDied(RuntimeError):
    """The Assistant process ended or stopped answering; the message says why."""


class AssistantProcess:
    """Start an Assistant process.

    Args:
        make_assistant (callable): builds the :class:`Assistant` inside the child.
        make_generator (callable): builds the batch generator inside the child.
        boss_queue_size (int, optional): windows the Boss may hold ready; the process
            makes at most ``WINDOWS_IN_FLIGHT`` + 2 more (in the pipe, in the reader
            thread's hand, waiting in the process) (default: 4).
        loss_queue_size (int, optional): loss messages that may wait to be written to the
            Assistant; beyond, the oldest waiting one is dropped (default: 64).
        rank (int, optional): the Boss worker's rank, in the process title
            ``autoassist-assistant (rank R)`` (default: 0).
    """

    def __init__(self, make_assistant, make_generator, boss_queue_size=4, loss_queue_size=64,
                 rank=0):
        # checked by the task's config (--assistant-boss-queue-size, --assistant-loss-queue-size)
        assert boss_queue_size >= 1 and loss_queue_size >= 1
        ctx = mp.get_context("fork")
        inbox_r, inbox_w = ctx.Pipe(duplex=False)  # losses and control, in order
        windows_r, windows_w = ctx.Pipe(duplex=False)
        replies_r, replies_w = ctx.Pipe(duplex=False)
        self.stop_event = ctx.Event()
        self._lost = 0  # losses sent after the pipe broke
        self._tokens = itertools.count()
        self._closed = False
        self._died_at = None  # when the Boss first saw the process dead
        self._owner = os.getpid()
        # windows the Boss's reader has received, counted by it and read by the child: a
        # pipe's buffer holds many small windows, so the child bounds what it has sent and
        # the Boss has not received by this count, not by what its pipe accepts
        received = ctx.RawValue("q", 0)
        self.proc = ctx.Process(
            target=worker.run, name=f"autoassist-assistant-{rank}", daemon=True,
            args=(make_assistant, make_generator, inbox_r, windows_w, replies_w,
                  self.stop_event, os.getpid(), rank, received,
                  (inbox_w, windows_r, replies_r)))
        self.proc.start()
        # the child's ends: with the parent's copies closed, the pipes end with the child
        # (and the child closes the Boss's ends, so its inbox ends with the Boss)
        for conn in (inbox_r, windows_w, replies_w):
            conn.close()
        self._sender = Sender(inbox_w, max_droppable=loss_queue_size,
                              name="autoassist-assistant-sender")
        self._inbound = (windows_r, replies_r)
        self._windows = queue.Queue(boss_queue_size)  # bounded: the child cannot run ahead
        self._replies = queue.Queue()
        self._errors = []  # relayed tracebacks and read failures, filled by the readers
        self._stop_readers = threading.Event()
        # The threads get no reference to self, so that __del__ can still run.
        self._window_reader = start_reader("windows", windows_r, self._windows,
                                            self._stop_readers, self._errors, received)
        self._reply_reader = start_reader("replies", replies_r, self._replies,
                                           self._stop_readers, self._errors)
        _live.add(self)

    learns = True  # a source of windows with an Assistant (WindowSource.learns)

    # -- Boss -> Assistant ------------------------------------------------------------
    def send_losses(self, ids, losses, seq=None, droppable=True) -> None:
        """Never blocks: when ``loss_queue_size`` droppable loss messages wait, the oldest
        is dropped. (*seq*, the batch's number, matters to
        :class:`~.local_source.LocalSource` only.)"""
        try:
            self._sender.put(LossMsg(ids, losses), droppable=droppable)
        except SenderClosed:  # the process is gone; the next check says so
            self._lost += 1

    @property
    def dropped_losses(self) -> int:
        """Loss messages that never reached the Assistant."""
        return self._sender.dropped + self._lost

    def send(self, msg) -> None:
        """A control message, behind every loss sent before it (never blocks)."""
        self.check_alive()
        try:
            self._sender.put(msg)
        except SenderClosed:
            self.check_alive()
            raise AssistantDied("the pipe to the Assistant process broke") from None

    def restart(self, gen_state: dict, accept_all: bool, reported_before=None,
                accept_all_from=None) -> None:
        """Make windows from *gen_state* on (the Boss drops those made before), accepting
        every pair from the window whose first batch is numbered *accept_all_from* on."""
        self.send(RestartStream(int(gen_state["data_pass"]), gen_state, accept_all,
                                accept_all_from))

    def load(self, state: dict) -> None:
        """An Assistant state, from this process or from :class:`~.local_source.LocalSource`,
        whose held losses (received, not learned) the Assistant learns now. They are part
        of the saved state, so none is dropped, however many wait."""
        state = dict(state)
        held = state.pop("held_losses", None) or []
        self.send(LoadState(state))
        for _, ids, losses in held:
            self.send_losses(ids, losses, droppable=False)

    # -- Assistant -> Boss ------------------------------------------------------------
    def get(self, timeout=REPLY_TIMEOUT):
        """The next window, raising :class:`AssistantDied` if the process dies (within
        about ``POLL_INTERVAL`` + ``DRAIN_GRACE``) or nothing arrives within *timeout*
        seconds. Complete windows that arrived before the process died are returned
        first."""
        return self._wait(self._windows, self._window_reader, timeout)

    def request_state(self) -> dict:
        """The Assistant's state after every loss sent so far that was not dropped (they
        travel ahead of the request on the same pipe); waits for the reply."""
        token = next(self._tokens)
        self.send(StateRequest(token))
        while True:
            got, state = self._wait(self._replies, self._reply_reader, REPLY_TIMEOUT)
            if got == token:
                return state

    def _wait(self, local, reader, timeout):
        if self._closed:
            self.check_alive()
        deadline = time.monotonic() + timeout
        while True:
            try:
                return local.get(timeout=POLL_INTERVAL)
            except queue.Empty:
                pass
            if self._errors or self._closed:
                self.check_alive()
            if not self.proc.is_alive():
                # Messages completed before the death may still be on their way: the
                # reader ends at the pipe's end, or gets DRAIN_GRACE to show it is stuck.
                if not reader.is_alive() or self._grace_left() == 0:
                    self.check_alive()
            elif time.monotonic() > deadline:
                raise AssistantDied(
                    f"the Assistant process sent nothing for {timeout:.0f}s (it may be stuck "
                    "or starved of CPU); rerun with --assistant-fallback uniform to train on "
                    "uniform batches when this happens")

    def _grace_left(self) -> float:
        """Seconds left of DRAIN_GRACE, counted from when the Boss first saw the death."""
        now = time.monotonic()
        if self._died_at is None:
            self._died_at = now
        return max(0.0, self._died_at + DRAIN_GRACE - now)

    def check_alive(self) -> None:
        """Raise :class:`AssistantDied` if the process failed, died or was shut down."""
        if self._closed:
            raise AssistantDied("the Assistant process was shut down")
        if not self._errors and self.proc.is_alive():
            return
        if not self._errors:
            # A traceback is sent just before the process exits: let it arrive.
            self._reply_reader.join(self._grace_left())
        if self._errors:
            raise AssistantDied(self._errors[0])
        raise AssistantDied(f"the Assistant process died: {_exit_cause(self.proc.exitcode)}")

    # the names of the source interface that LocalSource shares
    # the WindowSource protocol (.window_source), which the client holds it by
    next_window, state, check = get, request_state, check_alive

    # -- ending -----------------------------------------------------------------------
    def shutdown(self) -> None:
        """Stop the process and the reader threads; safe to call more than once."""
        if self._closed or os.getpid() != self._owner:  # a forked copy owns nothing
            return
        self._closed = True
        _live.discard(self)
        self.stop_event.set()
        try:
            self._sender.put(STOP)
        except SenderClosed:
            pass
        self.proc.join(JOIN_TIMEOUT)
        if self.proc.is_alive():
            self.proc.terminate()
            self.proc.join(JOIN_TIMEOUT)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()
        self._stop_readers.set()
        # the process is gone: a write still under way fails at once, a read ends
        self._sender.close(DRAIN_GRACE)
        for conn, reader in zip(self._inbound, (self._window_reader, self._reply_reader)):
            # The reader follows within POLL_INTERVAL; one that does not (a process the
            # Assistant started holds the pipe) is a daemon and keeps its end open.
            reader.join(DRAIN_GRACE)
            if not reader.is_alive():
                conn.close()

    def __del__(self):
        try:
            self.shutdown()
        except Exception:
            pass


def _exit_cause(exitcode) -> str:
    if exitcode is None:
        return "it stopped answering"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        hint = " (the OOM killer?)" if exitcode == -signal.SIGKILL else ""
        return f"it was killed by {name}{hint} without a traceback"
    return f"it exited with code {exitcode} without a traceback"


_live = weakref.WeakSet()


@atexit.register
def _shutdown_all():
    for proc in list(_live):
        proc.shutdown()
