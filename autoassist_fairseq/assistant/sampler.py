"""Algorithm 1 of the AutoAssist paper: which candidates go into the Boss's batches.

Draw i; with probability 1 - lambda_k take it, otherwise take it with probability
g(psi_i | theta). Together: P(accept i) = (1 - lambda_k) + lambda_k * g(psi_i | theta),
never below 1 - lambda_max, so no pair is excluded for good.
"""

import numpy as np


def accept_probability(utility: np.ndarray, lam: float) -> np.ndarray:
    """P(accept i) = (1 - lambda) + lambda * g_i."""
    return (1.0 - lam) + lam * np.asarray(utility, dtype=np.float64)


def accept_mask(utility: np.ndarray, lam: float, rng: np.random.Generator) -> np.ndarray:
    """One Bernoulli draw per candidate with :func:`accept_probability`."""
    return rng.random(len(utility)) < accept_probability(utility, lam)
