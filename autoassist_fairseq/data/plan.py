"""What the Assistant hands the Boss: the batches it made from one window of candidates."""

from dataclasses import dataclass, field
from typing import List, Optional

import numpy as np


def _no_ids():
    return np.zeros(0, np.int64)


@dataclass
class WindowPlan:
    """The batches made from one window of a data pass.

    Windows ``0 .. num_windows - 1`` of a pass hold candidates; window ``num_windows``
    batches the pairs still carried, and ends the pass. ``weight_ids`` (the pairs of
    ``batches`` and those carried on, ``state_after["carried"]``) have importance weights
    ``weights`` = 1 / P(accept) in the window that accepted them, for
    ``--assistant-reweight``.
    ``state_after`` is the generator's state once this window is made: the Boss keeps
    that of the last window it took, which is exactly where a resumed run must go on.
    """

    data_pass: int  # 1-based
    window: int
    batches: List[np.ndarray]
    considered_pairs: int = 0
    considered_tokens: int = 0
    accepted_pairs: int = 0
    accepted_tokens: int = 0
    expected_token_rate: float = 1.0
    weight_ids: np.ndarray = field(default_factory=_no_ids)
    weights: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    state_after: Optional[dict] = None
    stats: dict = field(default_factory=dict)
    first_seq: int = 0  # run-wide number of the first batch (see BatchGenerator.batches_made)

    @property
    def ends_pass(self) -> bool:
        return self.state_after is not None and self.state_after["data_pass"] != self.data_pass
