"""The two running quantities that steer the Assistant: T_k and lambda_k.

T_k, the loss threshold, is an exponential moving average of the per-sentence losses the
Boss reports, so "hard" always means "harder than the Boss's recent average".
lambda_k, the trust in the Assistant, follows its measured accuracy, corrected for
chance: it stays near 0 while the Assistant does no better than always guessing the
majority label, so an untrained Assistant shrinks nothing. It is capped by lambda_max < 1.
"""

from typing import Optional

import numpy as np


def moving_average(previous: Optional[float], losses: np.ndarray, decay: float,
                   statistic=np.mean) -> float:
    """previous <- decay * previous + (1 - decay) * statistic(losses); the first batch
    (*previous* None) sets it.

    Raises:
        ValueError: if *losses* is empty or holds a non-finite value, which would make the
            average inf or NaN for the rest of the run.
    """
    losses = np.asarray(losses, dtype=np.float64)
    if not len(losses) or not np.isfinite(losses).all():
        raise ValueError("a moving average of the losses needs a non-empty batch of finite "
                         "losses; drop non-finite losses first (Assistant.learn does)")
    value = float(statistic(losses))
    return value if previous is None else decay * previous + (1.0 - decay) * value


def update_threshold(threshold: Optional[float], losses: np.ndarray, decay: float) -> float:
    """T_k <- decay * T_k + (1 - decay) * mean(losses); the first batch sets T_k."""
    return moving_average(threshold, losses, decay)


def chance_corrected(accuracy: float, chance: float) -> float:
    """How far *accuracy* is from the majority-label baseline *chance* towards 1, in [0, 1]."""
    if chance >= 1.0:
        return 0.0
    return float(np.clip((accuracy - chance) / (1.0 - chance), 0.0, 1.0))


class AssistantSchedule:
    """Running T_k, accuracy and lambda_k.

    Args:
        threshold_decay (float): EMA factor of T_k per loss batch.
        accuracy_decay (float): EMA factor of the accuracy (and of its chance baseline).
        lambda_max (float): ceiling of lambda_k; every pair keeps an acceptance probability
            of at least ``1 - lambda_max``.
        warmup (int): loss batches to learn from before lambda_k may leave 0.
    """

    def __init__(self, threshold_decay: float, accuracy_decay: float, lambda_max: float,
                 warmup: int):
        self.threshold_decay = threshold_decay
        self.accuracy_decay = accuracy_decay
        self.lambda_max = lambda_max
        self.warmup = warmup
        self.threshold: Optional[float] = None
        self.accuracy = 0.5
        self.chance = 1.0
        self.positive_rate = 0.5
        self.lam = 0.0
        self.num_batches = 0

    def labels(self, losses: np.ndarray) -> np.ndarray:
        """z_i = 1[loss_i > T_k], T_k updated with this batch first."""
        self.threshold = update_threshold(self.threshold, losses, self.threshold_decay)
        return (losses > self.threshold).astype(np.float64)

    def observe(self, probs: np.ndarray, labels: np.ndarray) -> float:
        """Score predictions made before learning from *labels*; returns batch accuracy.

        The chance baseline is a constant guess of the label that has been the majority so
        far (not of this batch's majority, which would peek at the labels being scored).
        """
        hard = labels > 0.5
        accuracy = float(np.mean((probs > 0.5) == hard))
        a = self.accuracy_decay if self.num_batches else 0.0
        guess = self.positive_rate > 0.5 if self.num_batches else bool(hard.mean() > 0.5)
        chance = float(np.mean(hard == guess))
        self.positive_rate = a * self.positive_rate + (1.0 - a) * float(hard.mean())
        self.accuracy = a * self.accuracy + (1.0 - a) * accuracy
        self.chance = a * self.chance + (1.0 - a) * chance
        self.num_batches += 1
        if self.num_batches > self.warmup:
            self.lam = min(self.lambda_max, chance_corrected(self.accuracy, self.chance))
        return accuracy

    _STATE = ("threshold", "accuracy", "chance", "positive_rate", "lam", "num_batches")

    def state_dict(self) -> dict:
        return {k: getattr(self, k) for k in self._STATE}

    def load_state_dict(self, state: dict) -> None:
        for k in self._STATE:
            setattr(self, k, state[k])
        # this run's ceiling and warm-up hold from the first window on, also where the saved
        # run had others (a resume with a lower --assistant-lambda-max keeps its floor)
        self.lam = min(self.lam, self.lambda_max) if self.num_batches > self.warmup else 0.0
