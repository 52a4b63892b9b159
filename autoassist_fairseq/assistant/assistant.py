"""The Assistant: features + logistic model + schedule, learning from Boss losses."""

from dataclasses import dataclass, fields

import numpy as np

from ..features.store import FeatureStore
from .model import LogisticAssistant
from .sampler import accept_probability
from .schedule import AssistantSchedule


@dataclass
class AssistantHParams:
    """Hyperparameters of the Assistant; the task's ``--assistant-*`` flags fill them.

    Defaults were chosen with ``scripts/benchmark.py`` (see README, "Options" and "Results"):
    lr 4 learned more per Boss token than lr 1 in both measured seeds."""

    lr: float = 4.0
    weight_decay: float = 1e-5
    threshold_decay: float = 0.9
    accuracy_decay: float = 0.98
    lambda_max: float = 0.9
    warmup: int = 20

    def check(self) -> "AssistantHParams":
        """Raise ValueError naming the flag and its valid range for any bad value."""
        rules = {
            "lr": (self.lr > 0, "> 0"),
            "weight_decay": (0 <= self.weight_decay < 1, "in [0, 1)"),
            "threshold_decay": (0 <= self.threshold_decay < 1, "in [0, 1)"),
            "accuracy_decay": (0 <= self.accuracy_decay < 1, "in [0, 1)"),
            "lambda_max": (0 <= self.lambda_max < 1, "in [0, 1) (1 would let the Assistant "
                           "exclude pairs for good)"),
            "warmup": (self.warmup >= 0, ">= 0"),
        }
        for name, (ok, allowed) in rules.items():
            if not ok:
                flag = "--assistant-" + name.replace("_", "-")
                raise ValueError(f"{flag}={getattr(self, name)} is out of range: it must be "
                                 f"{allowed}")
        return self

    @classmethod
    def from_config(cls, cfg) -> "AssistantHParams":
        return cls(**{f.name: getattr(cfg, "assistant_" + f.name) for f in fields(cls)}).check()


class Assistant:
    """Learns P(loss_i > T_k) online from the Boss's per-sentence losses.

    Args:
        store (FeatureStore): psi_i of every pair, memory-mapped.
        hparams (AssistantHParams): hyperparameters.
    """

    def __init__(self, store: FeatureStore, hparams: AssistantHParams):
        self.store = store
        self.hparams = hparams.check()
        self.model = LogisticAssistant(store.dim, hparams.lr, hparams.weight_decay)
        self.schedule = AssistantSchedule(hparams.threshold_decay, hparams.accuracy_decay,
                                          hparams.lambda_max, hparams.warmup)

    def utility(self, ids: np.ndarray) -> np.ndarray:
        """g(psi_i | theta) of pairs *ids*."""
        return self.model.predict_proba(self.store.rows(ids))

    def accept_probability(self, ids: np.ndarray) -> np.ndarray:
        """P(accept i) of Algorithm 1 under the current lambda_k."""
        return accept_probability(self.utility(ids), self.schedule.lam)

    def learn(self, ids: np.ndarray, losses: np.ndarray) -> float:
        """Label with T_k, score the batch before learning it, then take one SGD step.

        Returns:
            float: the accuracy of the predictions made before this step.
        """
        labels = self.schedule.labels(np.asarray(losses, dtype=np.float64))
        probs = self.model.update(self.store.rows(ids), labels)
        return self.schedule.observe(probs, labels)

    @property
    def stats(self) -> dict:
        s = self.schedule
        return {"threshold": s.threshold if s.threshold is not None else float("nan"),
                "lambda": s.lam, "accuracy": s.accuracy, "chance": s.chance,
                "updates": s.num_batches}

    def state_dict(self) -> dict:
        return {"model": self.model.state_dict(), "schedule": self.schedule.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.schedule.load_state_dict(state["schedule"])
