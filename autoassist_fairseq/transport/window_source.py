"""What the Boss's :class:`~.client.AssistantClient` needs of a source of windows.

Two sources implement it: :class:`~.process.AssistantProcess` (the Assistant in its own
process, the default) and :class:`~.local_source.LocalSource` (the windows made in the
Boss's process: ``--assistant-sync``, and the uniform fallback). The client holds one
through this protocol only, so either can stand in for the other at any point of a run.
"""

from typing import Optional, Protocol

import numpy as np


class WindowSource(Protocol):
    """A source of the Boss's windows, fed with the Boss's losses."""

    #: whether an Assistant scores the windows (False: every pair accepted, uniform)
    learns: bool
    #: loss messages dropped so far because the Assistant fell behind
    dropped_losses: int

    def restart(self, gen_state: dict, accept_all: bool, reported_before: int,
                accept_all_from: Optional[int] = None) -> None:
        """Make windows from the generator state *gen_state* on; the batches numbered below
        *reported_before* were trained already. Every pair is accepted with *accept_all*,
        or from the window whose first batch is numbered *accept_all_from* on."""

    def load(self, state: dict) -> None:
        """Give the Assistant a saved state (its held losses are learned, none dropped)."""

    def send_losses(self, ids: np.ndarray, losses: np.ndarray, seq: int) -> None:
        """The per-sentence losses of the Boss's batch number *seq*; never blocks."""

    def next_window(self):
        """The next window; raises if the source has failed."""

    def state(self) -> dict:
        """``{"assistant": ..., "stats": ...}`` after every loss sent so far and not dropped."""

    def check(self) -> None:
        """Raise if the source has failed (a dead Assistant process)."""

    def shutdown(self) -> None:
        """Stop the source; idempotent."""
