"""Ctrl-C that Python drops is raised again at the Boss's next batch.

Python ignores an exception raised inside a finalizer (``__del__``, a weakref callback):
it prints "Exception ignored in ..." and goes on. A SIGINT whose ``KeyboardInterrupt``
lands there is lost, and training would go on after Ctrl-C. ``InterruptLatch`` wraps the
default SIGINT handler: it still raises at once, and also remembers the signal, so the
batch iterator raises it again before handing out the next batch.
"""

import signal
import threading


class InterruptLatch:
    """Remembers a SIGINT until :meth:`check` raises it (or :meth:`clear` drops it)."""

    def __init__(self):
        self.pending = False

    def install(self) -> bool:
        """Wrap Python's default SIGINT handler; leave any other handler alone.

        Returns True when installed (only the main thread may set signal handlers)."""
        if threading.current_thread() is not threading.main_thread() \
                or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            return False
        signal.signal(signal.SIGINT, self._handle)
        return True

    def _handle(self, signum, frame):
        self.pending = True
        signal.default_int_handler(signum, frame)

    def check(self) -> None:
        """Raise KeyboardInterrupt if a SIGINT came since the last check or clear."""
        if self.pending:
            self.pending = False
            raise KeyboardInterrupt("interrupted (Ctrl-C)")

    def clear(self) -> None:
        self.pending = False


LATCH = InterruptLatch()
