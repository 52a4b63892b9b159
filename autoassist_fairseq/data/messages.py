"""What travels between the Boss and its Assistant, and how long anyone waits for it.

BossQueue (Assistant -> Boss): ``WindowPlan`` batches, or ``AssistantError``.
AssistantQueue (Boss -> Assistant): ``LossMsg`` and the control messages below.
"""

from dataclasses import dataclass, field
from typing import List, Optional

import numpy as np

# Every blocking get/put waits at most this long before re-checking that the other side
# is alive and that nobody asked to stop (seconds).
POLL_INTERVAL = 0.05
# How long ``AssistantProcess.shutdown`` waits for the process to exit before killing it.
JOIN_TIMEOUT = 5.0
# How long the Boss waits for a reply to a control message (state, epoch start) before
# declaring the Assistant hung.
REPLY_TIMEOUT = 120.0


@dataclass
class WindowPlan:
    """The batches the Assistant made from one window of candidates.

    ``window == num_windows`` batches the remainders the windows deferred,
    ``window == num_windows + 1`` tops up a fixed batch count. ``weight_ids`` got
    importance weights ``weights`` = 1 / P(accept) in this window (every pair it accepted,
    deferred ones included; top-up pairs get 1), for ``--assistant-reweight``.
    """

    epoch: int
    window: int
    batches: List[np.ndarray]
    rejected: np.ndarray
    deferred: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    considered_pairs: int = 0
    considered_tokens: int = 0
    accepted_pairs: int = 0
    accepted_tokens: int = 0
    topup_pairs: int = 0
    expected_token_rate: float = 1.0
    weight_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    weights: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    stats: dict = field(default_factory=dict)


@dataclass
class LossMsg:
    """Per-sentence losses of one Boss batch: ``ids`` are dataset indices."""

    ids: np.ndarray
    losses: np.ndarray


@dataclass
class BeginEpoch:
    """Start producing windows of *epoch* from generator state *state* (None: fresh)."""

    epoch: int
    num_batches: Optional[int]
    state: Optional[dict] = None


@dataclass
class StateRequest:
    """Ask for the Assistant's state; answered on the reply queue."""

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


STOP = _Stop()  # tells the Assistant loop to end
