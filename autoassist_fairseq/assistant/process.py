"""``AssistantProcess``: one Assistant per Boss worker, in its own CPU process.

The Boss talks to it through bounded queues and never waits on its learning:
losses go with ``put_nowait`` (the oldest is dropped when the queue is full), and every
wait for a batch or a reply re-checks that the process is alive, so a dead Assistant
turns into an error within ``POLL_INTERVAL`` instead of a hang. ``shutdown`` is
idempotent and also runs at interpreter exit and from ``__del__``.
"""

import atexit
import itertools
import logging
import multiprocessing as mp
import os
import queue
import time
import weakref

from ..data.messages import (JOIN_TIMEOUT, POLL_INTERVAL, REPLY_TIMEOUT, STOP, LossMsg,
                             StateRequest)
from . import _worker

logger = logging.getLogger(__name__)


class AssistantDied(RuntimeError):
    """The Assistant process ended or stopped answering; the message says why."""


class AssistantProcess:
    """Start an Assistant process.

    Args:
        make_assistant (callable): builds the :class:`Assistant` inside the child.
        make_generator (callable): builds the :class:`BatchGenerator` inside the child.
        boss_queue_size (int): windows of batches the Assistant may prepare ahead.
        loss_queue_size (int): loss messages that may wait for the Assistant.
    """

    def __init__(self, make_assistant, make_generator, boss_queue_size=4, loss_queue_size=64):
        # fork: the child shares the parent's imports and memory maps (no re-import of
        # torch/fairseq as with spawn); it touches neither torch nor CUDA.
        ctx = mp.get_context("fork")
        self.boss_q = ctx.Queue(boss_queue_size)
        self.loss_q = ctx.Queue(loss_queue_size)
        self.control_q = ctx.Queue()
        self.reply_q = ctx.Queue()
        self.error_q = ctx.Queue()
        self.stop_event = ctx.Event()
        self.dropped_losses = 0
        self._tokens = itertools.count()
        self._closed = False
        self._owner = os.getpid()
        self.proc = ctx.Process(
            target=_worker.run, name="autoassist-assistant", daemon=True,
            args=(make_assistant, make_generator, self.boss_q, self.loss_q, self.control_q,
                  self.reply_q, self.error_q, self.stop_event, os.getpid()))
        self.proc.start()
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
    def get(self, timeout=REPLY_TIMEOUT, q=None):
        """Next item of the BossQueue (or *q*), raising :class:`AssistantDied` if the process
        dies or nothing arrives within *timeout* seconds."""
        if self._closed:
            self.check_alive()
        q = self.boss_q if q is None else q
        deadline = time.monotonic() + timeout
        while True:
            try:
                return q.get(timeout=POLL_INTERVAL)
            except queue.Empty:
                self.check_alive()
                if time.monotonic() > deadline:
                    raise AssistantDied(
                        f"the Assistant process sent nothing for {timeout:.0f}s (it may be stuck "
                        "or starved of CPU); rerun with --assistant-fallback uniform to train on "
                        "uniform batches when this happens") from None

    def request_state(self) -> dict:
        """The Assistant's state after the losses sent so far (waits for the reply)."""
        token = next(self._tokens)
        self.send(StateRequest(token))
        while True:
            got, state = self.get(q=self.reply_q)
            if got == token:
                return state

    def check_alive(self) -> None:
        if self._closed:
            raise AssistantDied("the Assistant process was shut down")
        if self.proc.is_alive():
            return
        try:
            cause = self.error_q.get(timeout=1.0).message
        except queue.Empty:
            cause = f"it exited with code {self.proc.exitcode} without a traceback (killed?)"
        raise AssistantDied(f"the Assistant process died: {cause}")

    # -- ending -----------------------------------------------------------------------
    def shutdown(self) -> None:
        """Stop the process and release the queues; safe to call more than once."""
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
        for q in (self.boss_q, self.loss_q, self.control_q, self.reply_q, self.error_q):
            q.cancel_join_thread()
            q.close()

    def __del__(self):
        try:
            self.shutdown()
        except Exception:
            pass


_live = weakref.WeakSet()


@atexit.register
def _shutdown_all():
    for proc in list(_live):
        proc.shutdown()
