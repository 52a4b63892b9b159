"""The ``rex`` learning-rate schedule: budget-aware decay to ``--min-lr`` at ``--max-update``.

REX, the reflected exponential schedule of Chen, Wolfe & Kyrillidis, "REX: Revisiting
Budgeted Training with an Improved Schedule" (MLSys 2022, https://arxiv.org/abs/2107.04197),
keeps the rate high for longer than the linear schedule and drops it faster at the end. With
progress z = t / T in [0, 1], the paper's profile multiplies the peak rate by::

    (1 - z) / (1/2 + 1/2 * (1 - z))

(1 at z = 0, 2/3 at z = 1/2, 0 at z = 1), here sampled at every update. Of the schedules
the paper compares it with, fairseq has cosine (``--lr-scheduler cosine``) and linear
(``--lr-scheduler polynomial_decay --power 1``).
"""

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import List

from fairseq.dataclass import FairseqDataclass
from fairseq.optim.lr_scheduler import FairseqLRScheduler, register_lr_scheduler
from omegaconf import II


def rex_multiplier(z: float) -> float:
    """The REX profile at progress *z* (clipped to [0, 1]): 1 at the start, 0 at the end."""
    remaining = 1.0 - min(max(z, 0.0), 1.0)
    return remaining / (0.5 + 0.5 * remaining)


@dataclass
class RexLRScheduleConfig(FairseqDataclass):
    warmup_updates: int = field(
        default=0,
        metadata={"help": "warmup the learning rate linearly for the first N updates"},
    )
    warmup_init_lr: float = field(
        default=-1,
        metadata={"help": "initial learning rate during warmup phase; default is --min-lr"},
    )
    lr: List[float] = field(
        default=II("optimization.lr"),
        metadata={"help": "peak learning rate, reached at the end of the warmup"},
    )
    min_lr: float = field(
        default=0.0, metadata={"help": "learning rate at the last update (--max-update)"}
    )
    max_update: int = field(
        default=II("optimization.max_update"),
        metadata={"help": "the budget: the rate reaches --min-lr at this update"},
    )


@register_lr_scheduler("rex", dataclass=RexLRScheduleConfig)
class RexLRSchedule(FairseqLRScheduler):
    """Decay the learning rate along the REX profile of `Chen et al. (2022)
    <https://arxiv.org/abs/2107.04197>`_, from ``--lr`` after the warmup to ``--min-lr`` at
    ``--max-update``.

    During warmup (as fairseq's ``cosine``)::

      lr = cfg.warmup_init_lr + update_num * (cfg.lr - cfg.warmup_init_lr) / cfg.warmup_updates

    After warmup, with ``z = (update_num - cfg.warmup_updates) / (cfg.max_update -
    cfg.warmup_updates)``::

      lr = cfg.min_lr + (cfg.lr - cfg.min_lr) * (1 - z) / (1/2 + 1/2 * (1 - z))

    The rate is a function of the update number alone, so a resumed run continues on the
    same curve; the budget is ``--max-update``, which the schedule therefore requires.
    """

    def __init__(self, cfg: RexLRScheduleConfig, fairseq_optimizer):
        super().__init__(cfg, fairseq_optimizer)
        if isinstance(cfg.lr, Collection) and len(cfg.lr) > 1:
            raise ValueError(
                f"--lr-scheduler rex takes one peak learning rate, got --lr {cfg.lr}: "
                "pass a single value"
            )
        self.max_lr = cfg.lr[0] if isinstance(cfg.lr, Collection) else cfg.lr
        if self.max_lr < cfg.min_lr:
            raise ValueError(
                f"--lr-scheduler rex: --lr {self.max_lr} is below --min-lr {cfg.min_lr}: "
                "the peak must be at least the final rate"
            )
        if cfg.max_update <= 0:
            raise ValueError(
                "--lr-scheduler rex decays to --min-lr at --max-update, and --max-update is "
                "not set: pass --max-update N (the budget in updates)"
            )
        if cfg.max_update <= cfg.warmup_updates:
            raise ValueError(
                f"--lr-scheduler rex: --max-update {cfg.max_update} leaves no updates after "
                f"--warmup-updates {cfg.warmup_updates}: raise --max-update or lower the warmup"
            )
        self.warmup_updates = cfg.warmup_updates
        self.warmup_init_lr = cfg.min_lr if cfg.warmup_init_lr < 0 else cfg.warmup_init_lr
        self.decay_updates = cfg.max_update - cfg.warmup_updates
        self.lr = self.step_update(0)

    def get_lr_at(self, num_updates: int) -> float:
        """The learning rate set after update *num_updates* (the rate of the next one)."""
        if num_updates < self.warmup_updates:
            step = (self.max_lr - self.warmup_init_lr) / self.warmup_updates
            return self.warmup_init_lr + num_updates * step
        z = (num_updates - self.warmup_updates) / self.decay_updates
        return self.cfg.min_lr + (self.max_lr - self.cfg.min_lr) * rex_multiplier(z)

    def step(self, epoch, val_loss=None):
        """Update the learning rate at the end of the given epoch."""
        super().step(epoch, val_loss)
        # the rate changes per update only
        return self.optimizer.get_lr()

    def step_update(self, num_updates):
        """Update the learning rate after each update."""
        self.lr = self.get_lr_at(num_updates)
        self.optimizer.set_lr(self.lr)
        return self.lr
