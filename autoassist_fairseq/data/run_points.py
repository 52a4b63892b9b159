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
        update_freq (int): batches per update, fairseq's ``--update-freq`` (one value:
            :func:`~..tasks.config.check_config` refuses values that vary by epoch).
    """

    anneal: float = 0.0
    max_update: int = 0
    max_epoch: int = 0
    save_interval_updates: int = 0
    update_freq: int = 1

    @classmethod
    def from_config(cls, cfg) -> "RunPoints":
        return cls(cfg.assistant_anneal, cfg.max_update or 0, cfg.max_epoch or 0,
                   cfg.save_interval_updates or 0, max(1, (cfg.update_freq or [1])[0]))

    @property
    def anneal_epoch(self) -> Optional[int]:
        """First epoch of annealing, when the run is measured in epochs."""
        if self.anneal <= 0 or self.max_update > 0 or self.max_epoch <= 0:
            return None
        return math.floor(_exact((1.0 - self.anneal) * self.max_epoch)) + 1

    @property
    def anneal_update(self) -> Optional[int]:
        """First (0-based) update of annealing, when the run is measured in updates."""
        if self.anneal <= 0 or self.max_update <= 0:
            return None
        return math.ceil(_exact((1.0 - self.anneal) * self.max_update))

    @property
    def anneal_batch(self) -> Optional[int]:
        """The run's batch count at which annealing starts, when the run is measured in
        updates: the first batch of :attr:`anneal_update` when every update takes
        ``update_freq`` batches (an epoch's last update may take fewer, which moves the
        start later by as many batches). A batch count, not an update, because windows are
        made ahead of training: the windows from this batch on accept every pair wherever
        training stands when they are made, so ``--assistant-sync`` runs repeat exactly."""
        update = self.anneal_update
        return None if update is None else update * self.update_freq

    def saves_after(self, update_num: int) -> bool:
        """Whether fairseq may save once 0-based update *update_num* is done (besides the
        end of an epoch)."""
        n = update_num + 1  # fairseq's update count once this update is done
        return self.save_interval_updates > 0 and n % self.save_interval_updates == 0 \
            or self.max_update > 0 and n >= self.max_update


def _exact(x: float) -> float:
    """*x* without the last bits of float rounding, so that floor and ceil of a product that
    is a whole number in decimal give that number ((1 - 0.8) * 5 is 0.99999...)."""
    return round(x, 9)
