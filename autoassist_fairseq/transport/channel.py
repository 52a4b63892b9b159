"""One direction of the Boss-Assistant transport: an ordered, never-blocking sender.

``Sender`` keeps an outbox in the sending process and a thread that writes it, message by
message and in order, into one end of a ``multiprocessing.Pipe``. Putting never blocks:
a slow or stalled reader only lengthens the outbox. Messages put as *droppable* (the
Boss's losses) are bounded: when ``max_droppable`` of them wait, the oldest waiting one
is dropped and counted; the others (control messages, windows, replies) are never dropped.
Because every message of one direction travels on one pipe in the order it was put, the
reader sees a control message only after every message put before it, or its drop.

The reading side is a plain ``Connection``: ``recv`` raises ``EOFError`` (or ``OSError``
mid-message) once the writer is gone, provided no other process holds a copy of the
write end, which :class:`~.process.AssistantProcess` ensures by closing its copies. In the
Boss, :func:`start_reader` reads such a connection in a daemon thread into a local queue.
"""

import queue
import threading
from collections import deque
from multiprocessing.reduction import ForkingPickler

from .messages import POLL_INTERVAL, AssistantError


class SenderClosed(RuntimeError):
    """The sender was closed, or its pipe broke (the reader is gone)."""


class Sender:
    """Send messages over *conn* in order, from a daemon thread.

    Args:
        conn (multiprocessing.connection.Connection): the write end of a pipe.
        max_droppable (int, optional): droppable messages that may wait; None: no bound.
        name (str): the thread's name.
    """

    def __init__(self, conn, max_droppable=None, name="autoassist-sender"):
        self.conn = conn
        self.max_droppable = max_droppable
        self.dropped = 0
        self.error = None  # why the pipe broke, if it did
        self._outbox = deque()  # (message, droppable), oldest first
        self._droppable = 0
        self._in_flight = False
        self._closed = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def put(self, msg, droppable=False) -> None:
        """Queue *msg* behind every message put before it; never blocks."""
        with self._cond:
            if self._closed or self.error is not None:
                raise SenderClosed(f"cannot send: {self.error or 'the sender was closed'}")
            if droppable and self.max_droppable is not None \
                    and self._droppable >= self.max_droppable:
                self._drop_oldest()
            self._outbox.append((msg, droppable))
            self._droppable += droppable
            self._cond.notify()

    def _drop_oldest(self) -> None:
        for k, (_, droppable) in enumerate(self._outbox):
            if droppable:
                del self._outbox[k]
                self._droppable -= 1
                self.dropped += 1
                return

    def __len__(self) -> int:
        """Messages put and not yet written (the one being written included)."""
        with self._cond:
            return len(self._outbox) + self._in_flight

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._outbox and not self._closed:
                    self._cond.wait()
                if not self._outbox:
                    return  # closed and flushed
                msg, droppable = self._outbox.popleft()
                self._droppable -= droppable
                self._in_flight = True
            try:
                self.conn.send(msg)
            except (OSError, EOFError, ValueError) as err:  # the reader is gone
                with self._cond:
                    self.error = err
                    self._outbox.clear()
                    self._in_flight = False
                    self._cond.notify_all()
                return
            with self._cond:
                self._in_flight = False
                self._cond.notify_all()

    def flush(self, timeout: float) -> bool:
        """Wait up to *timeout* seconds until everything put was written."""
        with self._cond:
            return self._cond.wait_for(
                lambda: self.error is not None or not (self._outbox or self._in_flight),
                timeout)

    def close(self, timeout: float = 0.0) -> None:
        """Stop after writing what is queued (waiting up to *timeout* seconds for it)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self.conn.close()


def start_reader(name, src, dst, stop, errors, received=None):
    """A daemon thread that moves complete messages from pipe end *src* to local queue *dst*
    (:func:`_relay`): the Boss then waits on *dst*, never on a pipe a dying process may
    leave mid-message."""
    thread = threading.Thread(target=_relay, args=(src, dst, stop, errors, received),
                              name=f"autoassist-{name}-reader", daemon=True)
    thread.start()
    return thread


def _relay(src, dst, stop, errors, received=None):
    """Move complete messages from pipe end *src* to local queue *dst* until *stop* is set
    or the pipe ends; an :class:`AssistantError` goes to *errors*. *received* (a shared
    counter, this thread its only writer) counts the messages read."""
    while not stop.is_set():
        try:
            if not src.poll(POLL_INTERVAL):
                continue
            data = src.recv_bytes()
        except (EOFError, OSError, ValueError):
            return  # the process is gone (OSError: it died mid-message) or shut down
        try:
            # apart from the read: unpickling a damaged message raises EOFError or
            # ValueError too, which must not pass for the pipe's end
            msg = ForkingPickler.loads(data)
        except Exception as err:  # noqa: BLE001  (whatever unpickling raises)
            errors.append(f"the Boss could not read a message of the Assistant process "
                          f"({len(data)} bytes: {err!r}): a message damaged in the pipe; the "
                          "run cannot go on with this Assistant (--assistant-sync makes the "
                          "batches in the Boss's process, without a pipe)")
            return
        if isinstance(msg, AssistantError):
            errors.append(f"the Assistant process died: {msg.message}")
            continue
        if received is not None:
            received.value += 1
        while not stop.is_set():
            try:
                dst.put(msg, timeout=POLL_INTERVAL)  # blocks while the Boss holds enough
                break
            except queue.Full:
                pass
