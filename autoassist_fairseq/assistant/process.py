"""``AssistantProcess``: one Assistant per Boss worker, in its own CPU process.

The Boss talks to it through bounded queues and never waits on its learning: losses go
with ``put_nowait`` (the oldest is dropped when the queue is full), and every wait for a
window or a reply re-checks that the process is alive, so a dead Assistant turns into an
error within about a second instead of a hang.

A window pickles to far more than a pipe holds, so the process may die halfway through
writing one. ``multiprocessing.Queue.get(timeout=...)`` only bounds the wait for the first
byte and then blocks until the message is complete, which it never is. Reads from the
process therefore happen in daemon threads, one per inbound queue, that move complete
messages into local queues; the Boss waits only on those. The parent closes its copy of
each inbound pipe's write end, so the pipe reports its end once the process is gone and
the reader thread finishes instead of waiting for the rest of a cut-off message.
``shutdown`` is idempotent and also runs at interpreter exit and from ``__del__``.
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

from . import _worker
from .messages import (DRAIN_GRACE, JOIN_TIMEOUT, POLL_INTERVAL, REPLY_TIMEOUT, STOP,
                       WINDOWS_IN_FLIGHT, AssistantError, LossMsg, StateRequest)

logger = logging.getLogger(__name__)


class AssistantDied(RuntimeError):
    """The Assistant process ended or stopped answering; the message says why."""


class AssistantProcess:
    """Start an Assistant process.

    Args:
        make_assistant (callable): builds the :class:`Assistant` inside the child.
        make_generator (callable): builds the batch generator inside the child.
        boss_queue_size (int, optional): windows the Boss may hold ready; the process
            makes at most ``WINDOWS_IN_FLIGHT`` + 2 more (one in the pipe, one in the
            reader thread's hand, one waiting in the process) (default: 4).
        loss_queue_size (int, optional): loss messages that may wait for the Assistant
            (default: 64).
        rank (int, optional): the Boss worker's rank, in the process title
            ``autoassist-assistant (rank R)`` (default: 0).
    """

    def __init__(self, make_assistant, make_generator, boss_queue_size=4, loss_queue_size=64,
                 rank=0):
        if boss_queue_size < 1 or loss_queue_size < 1:
            raise ValueError(f"boss_queue_size and loss_queue_size must be >= 1, got "
                             f"{boss_queue_size} and {loss_queue_size}")
        # fork: the child shares the parent's imports and memory maps (no re-import of
        # torch/fairseq as with spawn); it touches neither torch nor CUDA.
        ctx = mp.get_context("fork")
        windows_q = ctx.Queue(WINDOWS_IN_FLIGHT)
        replies_q = ctx.Queue()
        self.loss_q = ctx.Queue(loss_queue_size)
        self.control_q = ctx.Queue()
        self.stop_event = ctx.Event()
        self.dropped_losses = 0
        self._tokens = itertools.count()
        self._closed = False
        self._died_at = None  # when the Boss first saw the process dead
        self._owner = os.getpid()
        self.proc = ctx.Process(
            target=_worker.run, name=f"autoassist-assistant-{rank}", daemon=True,
            args=(make_assistant, make_generator, windows_q, self.loss_q, self.control_q,
                  replies_q, self.stop_event, os.getpid(), rank))
        self.proc.start()
        # Only the child writes to these: with the parent's write ends closed, the pipe
        # reports its end (EOFError) as soon as the child is gone, even mid-message.
        for q in (windows_q, replies_q):
            q._writer.close()
        self._inbound = (windows_q, replies_q)
        self._windows = queue.Queue(boss_queue_size)  # bounded: the child cannot run ahead
        self._replies = queue.Queue()
        self._errors = []  # relayed tracebacks and read failures, filled by the readers
        self._stop_readers = threading.Event()
        # The threads get no reference to self, so that __del__ can still run.
        self._window_reader = _start_reader("windows", windows_q, self._windows,
                                            self._stop_readers, self._errors)
        self._reply_reader = _start_reader("replies", replies_q, self._replies,
                                           self._stop_readers, self._errors)
        _live.add(self)

    # -- Boss -> Assistant ------------------------------------------------------------
    def send_losses(self, ids, losses) -> None:
        """Never blocks: when the queue is full the oldest message makes room."""
        msg = LossMsg(ids, losses)
        for _ in range(3):
            try:
                self.loss_q.put_nowait(msg)
                return
            except queue.Full:
                try:
                    self.loss_q.get_nowait()
                    self.dropped_losses += 1
                except queue.Empty:
                    pass
        self.dropped_losses += 1

    def send(self, msg) -> None:
        """A control message (unbounded queue, so it never blocks)."""
        self.check_alive()
        self.control_q.put(msg)

    # -- Assistant -> Boss ------------------------------------------------------------
    def get(self, timeout=REPLY_TIMEOUT):
        """The next window, raising :class:`AssistantDied` if the process dies (within
        about ``POLL_INTERVAL`` + ``DRAIN_GRACE``) or nothing arrives within *timeout*
        seconds. Complete windows that arrived before the process died are returned
        first."""
        return self._wait(self._windows, self._window_reader, timeout)

    def request_state(self) -> dict:
        """The Assistant's state after the losses sent so far (waits for the reply)."""
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

    # -- ending -----------------------------------------------------------------------
    def shutdown(self) -> None:
        """Stop the process and the reader threads; safe to call more than once."""
        if self._closed or os.getpid() != self._owner:  # a forked copy owns nothing
            return
        self._closed = True
        _live.discard(self)
        self.stop_event.set()
        try:
            self.control_q.put_nowait(STOP)
        except (ValueError, OSError):
            pass
        self.proc.join(JOIN_TIMEOUT)
        if self.proc.is_alive():
            self.proc.terminate()
            self.proc.join(JOIN_TIMEOUT)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()
        self._stop_readers.set()
        for q in (self.loss_q, self.control_q):
            q.cancel_join_thread()  # a feeder stuck on a dead reader must not block exit
            q.close()
        for q, reader in zip(self._inbound, (self._window_reader, self._reply_reader)):
            # The process is gone, so the pipe has ended and the reader follows within
            # POLL_INTERVAL; one that does not is a daemon and keeps its queue open.
            reader.join(DRAIN_GRACE)
            if not reader.is_alive():
                q.close()
                q._reader.close()

    def __del__(self):
        try:
            self.shutdown()
        except Exception:
            pass


def _start_reader(name, src, dst, stop, errors):
    thread = threading.Thread(target=_relay, args=(src, dst, stop, errors),
                              name=f"autoassist-{name}-reader", daemon=True)
    thread.start()
    return thread


def _relay(src, dst, stop, errors):
    """Move complete messages from multiprocessing queue *src* to local queue *dst* until
    *stop* is set or the pipe ends; an :class:`AssistantError` goes to *errors*."""
    while not stop.is_set():
        try:
            msg = src.get(timeout=POLL_INTERVAL)
        except queue.Empty:
            continue
        except (EOFError, OSError, ValueError):
            return  # the process is gone (OSError: it died mid-message) or shut down
        except Exception as err:  # unpickling failed: the Boss must hear of it
            errors.append(f"the Boss could not read a message of the Assistant process: "
                          f"{err!r}")
            return
        if isinstance(msg, AssistantError):
            errors.append(f"the Assistant process died: {msg.message}")
            continue
        while not stop.is_set():
            try:
                dst.put(msg, timeout=POLL_INTERVAL)  # blocks while the Boss holds enough
                break
            except queue.Full:
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
