"""What travels between the Boss and its Assistant process, and how long anyone waits.

Assistant -> Boss, windows pipe: the batch generator's window plans (the process only
forwards them, whatever their type).
Assistant -> Boss, replies pipe: ``(token, state)`` answers to :class:`StateRequest`, and
one :class:`AssistantError` if the Assistant loop fails. It is separate from the windows
so that a reply or a traceback never waits behind windows the Boss has not taken yet.
Boss -> Assistant, one pipe: :class:`LossMsg` and the control messages below, in the
order sent (a state request is read after every loss sent before it).
"""

from dataclasses import dataclass
from typing import Optional

import numpy as np

# Every blocking get/put waits at most this long before re-checking that the other side
# is alive and that nobody asked to stop (seconds).
POLL_INTERVAL = 0.05
# After the Assistant process has died, how long the Boss keeps taking complete messages
# that were already in the pipe before it raises (seconds). Normally the pipe reports its
# end as soon as the process is gone, so this only bounds an unusual case, e.g. a process
# the Assistant started that still holds the pipe open.
DRAIN_GRACE = 1.0
# How long ``AssistantProcess.shutdown`` waits for the process to exit before killing it.
JOIN_TIMEOUT = 5.0
# How long the Boss waits for a window or a reply to a control message before declaring
# the Assistant hung.
REPLY_TIMEOUT = 120.0
# Windows that may sit in the multiprocessing pipe between the Assistant and the Boss's
# reader thread, on top of the ``boss_queue_size`` the Boss holds: the process still
# cannot run far ahead of the Boss, and a few large windows bound the memory in flight.
WINDOWS_IN_FLIGHT = 1


@dataclass
class LossMsg:
    """Per-sentence losses of one Boss batch: ``ids`` are dataset indices."""

    ids: np.ndarray
    losses: np.ndarray


@dataclass
class RestartStream:
    """(Re)start the stream of windows: from a generator state, or at a data pass.

    Windows made before it are dropped by the Boss (their ``generation`` is older).

    Args:
        data_pass (int): the 1-based data pass to start when *state* is None.
        state (dict, optional): batch generator state to go on from (default: None).
        accept_all (bool, optional): leave no pair out from here on (annealing, the
            uniform fallback) (default: False).
        accept_all_from (int, optional): leave no pair out from the window whose first
            batch has this number on (annealing by updates) (default: None).
    """

    data_pass: int
    state: Optional[dict] = None
    accept_all: bool = False
    accept_all_from: Optional[int] = None


@dataclass
class StateRequest:
    """Ask for the Assistant's state; answered on the replies queue."""

    token: int


@dataclass
class LoadState:
    """Replace the Assistant's learned state (weights, T_k, lambda_k, ...)."""

    state: dict


@dataclass
class AssistantError:
    """An exception in the Assistant process, with its formatted traceback."""

    message: str


class _Stop:
    def __repr__(self):
        return "STOP"

    def __reduce__(self):  # unpickles to the one STOP, so ``msg is STOP`` holds
        return "STOP"


STOP = _Stop()  # tells the Assistant loop to end
