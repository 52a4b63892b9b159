"""The Assistant's model: L2-regularised logistic regression g(psi | theta).

g(psi_i | theta) estimates P(loss_i > T_k), the probability that the Boss still finds
pair i hard. Pure functions over numpy/scipy arrays; ``LogisticAssistant`` only holds
the parameters.
"""

import numpy as np
import scipy.sparse as sp


def predict_proba(features: sp.csr_matrix, theta: np.ndarray, bias: float) -> np.ndarray:
    """g(psi | theta) = sigmoid(psi . theta + b) for every row of *features*."""
    logits = features @ theta + bias
    return 1.0 / (1.0 + np.exp(-np.clip(logits, -30.0, 30.0)))


def sgd_step(features: sp.csr_matrix, labels: np.ndarray, theta: np.ndarray, bias: float,
             lr: float, weight_decay: float):
    """One update of eq. (5) of the AutoAssist paper, in place on *theta*.

    theta <- (1 - gamma) theta - eta * (1/|B|) sum_i grad_theta CE(z_i, g(psi_i | theta)),
    with grad_theta CE = (g(psi_i) - z_i) psi_i. The whole batch is one sparse product.

    Args:
        features (scipy.sparse.csr_matrix): psi of the batch (|B| x d).
        labels (np.ndarray): z_i in {0, 1}.
        theta (np.ndarray): weights (d,), updated in place.
        bias (float): intercept (not decayed).
        lr (float): eta.
        weight_decay (float): gamma.

    Returns:
        tuple: (probabilities before the step, new bias).
    """
    probs = predict_proba(features, theta, bias)
    residual = (probs - labels) / max(len(labels), 1)
    if weight_decay:
        theta *= 1.0 - weight_decay
    theta -= lr * (features.T @ residual)
    return probs, bias - lr * float(residual.sum())


class LogisticAssistant:
    """Parameters of g(psi | theta) and their online updates.

    Args:
        dim (int): feature dimension ``|V_src| + |V_tgt|``.
        lr (float): learning rate eta of eq. (5).
        weight_decay (float): gamma of eq. (5), the per-update shrink of theta.
    """

    def __init__(self, dim: int, lr: float, weight_decay: float):
        self.theta = np.zeros(dim, dtype=np.float64)
        self.bias = 0.0
        self.lr = lr
        self.weight_decay = weight_decay

    def predict_proba(self, features: sp.csr_matrix) -> np.ndarray:
        return predict_proba(features, self.theta, self.bias)

    def update(self, features: sp.csr_matrix, labels: np.ndarray) -> np.ndarray:
        """Learn from one batch; returns the probabilities it predicted *before* learning."""
        probs, self.bias = sgd_step(features, labels, self.theta, self.bias, self.lr,
                                    self.weight_decay)
        # one NaN in the weights makes every later P(accept) NaN, and no pair is ever taken
        if not (np.isfinite(self.bias) and np.isfinite(self.theta).all()):
            raise FloatingPointError(
                f"the Assistant's weights became non-finite after a loss batch (--assistant-lr "
                f"{self.lr}): the feature file holds non-finite values, or the rate is too "
                "high; rebuild the features with autoassist-features, or lower --assistant-lr")
        return probs

    def state_dict(self) -> dict:
        # float64 as trained: a resumed Assistant is bit-identical to the uninterrupted one
        return {"theta": self.theta.copy(), "bias": self.bias}

    def load_state_dict(self, state: dict) -> None:
        theta = np.asarray(state["theta"], dtype=np.float64)
        if theta.shape != self.theta.shape:
            raise ValueError(f"saved Assistant weights have dimension {theta.shape[0]} but the "
                             f"features have {self.theta.shape[0]}: the checkpoint was trained on "
                             "other data or dictionaries; use --reset-dataloader to start a new "
                             "Assistant")
        self.theta = theta
        self.bias = float(state["bias"])
