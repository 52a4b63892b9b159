"""The points of a run at which the train iterator acts on its own: where annealing starts,
and the updates after which fairseq saves a checkpoint (every rank's batch plan is gathered
before each, at the same update on every rank)."""

import math
from dataclasses import dataclass
from typing import Optional


@dataclass
class RunPoints:
    """Args:
        anneal (float): ``--assistant-anneal``, the final share of the run in which every
            pair is accepted; in updates with ``--max-update``, else in epochs.
        max_update, max_epoch (int): fairseq's ``--max-update``, ``--max-epoch`` (0: none).
        save_interval_updates (int): fairseq's ``--save-interval-updates`` (0: none).
    """

    anneal: float = 0.0
    max_update: int = 0
    max_epoch: int = 0
    save_interval_updates: int = 0

    @classmethod
    def from_config(cls, cfg) -> "RunPoints":
        return cls(cfg.assistant_anneal, cfg.max_update or 0, cfg.max_epoch or 0,
                   cfg.save_interval_updates or 0)

    @property
    def anneal_epoch(self) -> Optional[int]:
        """First epoch of annealing, when the run is measured in epochs."""
        if self.anneal <= 0 or self.max_update > 0 or self.max_epoch <= 0:
            return None
        return math.floor((1.0 - self.anneal) * self.max_epoch) + 1

    def anneals_at(self, update_num: int) -> bool:
        """Whether 0-based update *update_num* lies in the annealed end of the run, when the
        run is measured in updates."""
        return self.anneal > 0 and self.max_update > 0 \
            and update_num >= (1.0 - self.anneal) * self.max_update

    def saves_after(self, update_num: int) -> bool:
        """Whether fairseq may save once 0-based update *update_num* is done (besides the
        end of an epoch)."""
        n = update_num + 1  # fairseq's update count once this update is done
        return self.save_interval_updates > 0 and n % self.save_interval_updates == 0 \
            or self.max_update > 0 and n >= self.max_update
