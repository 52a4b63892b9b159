"""The Assistant: features + logistic model + schedule, learning from Boss losses."""

from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..features.store import FeatureStore
from ..metrics import assistant_stats
from .model import LogisticAssistant
from .rules import RULES, PairHistory, parse_random_rates, pass_rate
from .visits import PairVisits
from .acceptance import accept_probability
from .schedule import AssistantSchedule


@dataclass
class AssistantHParams:
    """Hyperparameters of the Assistant; the task's ``--assistant-*`` flags fill them, and
    :func:`~..tasks.config.check_hparams` checks their values.

    Defaults were chosen with ``research/bench`` (see docs/results/multi30k.md, "Changes tried, one at a time"):
    lr 4 learned more per Boss token than lr 1 in both measured seeds.

    ``rule`` picks the selection rule (:mod:`.rules`); the default is the paper's
    Algorithm 1. ``random_rates`` feeds ``random``.
    The ``noise_*`` fields steer the test of ``learnable`` and ``noise`` for unlearnable
    pairs: a pair is skipped once its loss was above the EMA of the ``noise_quantile``
    quantile of the loss batches at ``noise_patience`` consecutive visits without falling
    by more than ``noise_min_decline`` (relative) between them. Defaults: 0.8 flags only
    the top fifth of the losses, where misaligned pairs gather (on a noisy Multi30k their
    mean loss was 4.89 against 3.46 for clean pairs after 8 epochs); 2 visits is the fewest
    that can show the absence of a decline; 0.02 lies below the per-epoch decline of the Boss's mean
    training loss while it still learns, so pairs that keep pace are never flagged."""

    lr: float = 4.0
    weight_decay: float = 1e-5
    threshold_decay: float = 0.9
    accuracy_decay: float = 0.98
    lambda_max: float = 0.9
    warmup: int = 20
    rule: str = "paper"
    random_rates: str = ""
    noise_quantile: float = 0.8
    noise_min_decline: float = 0.02
    noise_patience: int = 2

    def __post_init__(self):
        # fairseq's ChoiceEnum values are enums whose str() is the choice
        self.rule, self.random_rates = str(self.rule), str(self.random_rates or "")


class Assistant:
    """Learns P(loss_i > T_k) online from the Boss's per-sentence losses, and decides from
    it which candidates the Boss trains on, by the rule ``hparams.rule`` (:mod:`.rules`).

    Whatever the rule, g(psi | theta), T_k and lambda_k learn from every finite loss the
    same way, so their logged values stay comparable across rules.

    Args:
        store (FeatureStore): psi_i of every pair, memory-mapped.
        hparams (AssistantHParams): hyperparameters.
        suspect (np.ndarray, optional): the pairs the pair checks flag (a bool per row),
            accepted at most at the floor 1 - lambda_max from the first window; None: no
            pair checks (see :func:`~..features.training.open_train_features`).
    """

    def __init__(self, store: FeatureStore, hparams: AssistantHParams,
                 suspect: Optional[np.ndarray] = None):
        self.store = store
        # the values are checked by tasks.config.check_hparams, which names the flags
        assert hparams.rule in RULES and 0 <= hparams.lambda_max < 1, hparams
        assert hparams.rule != "random" or hparams.random_rates, "the random rule's rates"
        self.hparams = hparams
        self.model = LogisticAssistant(store.dim, hparams.lr, hparams.weight_decay)
        self.schedule = AssistantSchedule(hparams.threshold_decay, hparams.accuracy_decay,
                                          hparams.lambda_max, hparams.warmup)
        self.rates = parse_random_rates(hparams.random_rates) if hparams.random_rates else ()
        self.history = None
        if hparams.rule in ("learnable", "noise"):  # the others need no per-pair memory
            self.history = PairHistory(store.num_rows, hparams.noise_quantile,
                                       hparams.threshold_decay, hparams.noise_min_decline,
                                       hparams.noise_patience)
        # every rule records each pair's losses over its visits (its training dynamics)
        self.visits = PairVisits(store.num_rows)
        assert hparams.rule != "random" or suspect is None, "the random control skips at random"
        self.suspect = suspect
        self.data_pass = 1
        self.nonfinite = 0

    def begin_pass(self, data_pass: int) -> None:
        """Enter 1-based *data_pass* (the ``random`` rule's rate depends on it)."""
        self.data_pass = int(data_pass)

    def utility(self, ids: np.ndarray) -> np.ndarray:
        """g(psi_i | theta) of pairs *ids*."""
        return self.model.predict_proba(self.store.rows(ids))

    def accept_probability(self, ids: np.ndarray) -> np.ndarray:
        """P(accept i) under the rule and the current lambda_k.

        - ``paper``: (1 - lambda_k) + lambda_k g_i (Algorithm 1 of the paper, with the g of
          eq. 5);
        - ``random``: r_e of the current pass for every pair;
        - ``learnable``: (1 - lambda_k) + lambda_k u_i, u_i of
          :func:`~.rules.learnable_utility`; a pair taken for unlearnable gets the floor
          1 - lambda_max at once. lambda_k measures how far the *features'* prediction g can
          be trusted; the unlearnable mark rests on the pair's own losses, and under lambda_k
          (0.47 on noisy Multi30k) a marked pair was still accepted half the time.
        - ``noise``: 1 for every pair, except the floor 1 - lambda_max for a pair taken for
          unlearnable (the same mark as ``learnable``'s).

        With pair checks, a flagged pair gets at most the floor 1 - lambda_max under any
        rule but ``random``.
        """
        rule = self.hparams.rule
        if rule == "random":
            return np.full(len(ids), pass_rate(self.rates, self.data_pass))
        ids = np.asarray(ids, dtype=np.int64)
        prob = self._rule_probability(ids)
        if self.suspect is not None:
            prob = np.where(self.suspect[ids], np.minimum(prob, 1.0 - self.hparams.lambda_max), prob)
        return prob

    def _rule_probability(self, ids: np.ndarray) -> np.ndarray:
        """P(accept) of the ``paper``, ``learnable`` and ``noise`` rules (see above)."""
        rule = self.hparams.rule
        if rule in ("learnable", "noise"):
            if rule == "noise":
                prob = np.ones(len(ids))
            else:
                u = self.history.utility(ids, self.utility, self.schedule.threshold)
                prob = accept_probability(u, self.schedule.lam)
            if self.schedule.threshold is not None:  # both rules' floor for the marked
                prob[self.history.is_unlearnable(ids)] = 1.0 - self.hparams.lambda_max
            return prob
        return accept_probability(self.utility(ids), self.schedule.lam)

    def learn(self, ids: np.ndarray, losses: np.ndarray) -> float:
        """Label with T_k, score the batch before learning it, then take one SGD step.

        Non-finite losses (fp16 overflow, a diverging step) are dropped first and counted in
        ``stats["nonfinite"]``: one of them would set T_k to inf or NaN for good, after
        which every label would read "easy" and lambda_k would stop moving.

        Returns:
            float: the accuracy of the predictions made before this step (NaN if the batch
            held no finite loss).
        """
        ids = np.asarray(ids, dtype=np.int64)
        losses = np.asarray(losses, dtype=np.float64)
        if ids.shape != losses.shape:
            raise ValueError(f"learn() got {ids.size} ids but {losses.size} losses: it needs "
                             "one loss per id, as 1-d arrays")
        finite = np.isfinite(losses)
        if not finite.all():
            self.nonfinite += int(np.count_nonzero(~finite))
            ids, losses = ids[finite], losses[finite]
        if not len(ids):
            return float("nan")
        labels = self.schedule.labels(losses)
        self.visits.observe(ids, losses, self.data_pass)
        if self.history is not None:
            self.history.observe(ids, losses)
        probs = self.model.update(self.store.rows(ids), labels)
        return self.schedule.observe(probs, labels)

    @property
    def stats(self) -> dict:
        s = self.schedule
        return assistant_stats(
            threshold=s.threshold if s.threshold is not None else float("nan"), lam=s.lam,
            accuracy=s.accuracy, chance=s.chance, loss_batches=s.num_batches,
            nonfinite=self.nonfinite,
            unlearnable=self.history.unlearnable if self.history is not None else 0)

    def state_dict(self) -> dict:
        state = {"model": self.model.state_dict(), "schedule": self.schedule.state_dict(),
                 "nonfinite": self.nonfinite, "visits": self.visits.state_dict(),
                 "settings": self.settings()}
        if self.history is not None:
            state["history"] = self.history.state_dict()
        return state

    def settings(self) -> dict:
        """The flags a resume may change that shape this Assistant's answers: a state records
        them, so that a resumed run can say which changed (the Boss's client logs it); this
        run's own hold from its first window."""
        return {"lambda_max": float(self.hparams.lambda_max),
                "pair_checks": None if self.suspect is None
                else int(np.count_nonzero(self.suspect))}

    def load_state_dict(self, state: dict) -> None:
        """Restore a state; the pass number is not part of it (``begin_pass`` sets it).

        A state saved under another rule loads too: a ``learnable`` or ``noise`` Assistant
        then starts its loss history empty, the other rules ignore a saved history.
        """
        self.model.load_state_dict(state["model"])
        self.schedule.load_state_dict(state["schedule"])
        self.nonfinite = int(state.get("nonfinite", 0))
        if "visits" in state:
            self.visits.load_state_dict(state["visits"])
        else:  # a state that recorded no visits: the dynamics start from the resume
            self.visits.reset()
        if self.history is not None:
            if "history" in state:
                self.history.load_state_dict(state["history"])
            else:
                self.history.reset()
