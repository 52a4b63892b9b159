"""Algorithm 1 of the AutoAssist paper: which candidates go into the Boss's batches.

Draw i; with probability 1 - lambda_k take it, otherwise take it with probability
g(psi_i | theta). Together: P(accept i) = (1 - lambda_k) + lambda_k * g(psi_i | theta),
never below 1 - lambda_max, so no pair is excluded for good. The Assistant computes the
probability; the batch generator draws with :func:`draw_accepted`, the one implementation
of the draw, from a generator seeded by (seed, pass, shard, window) so that the draw
repeats at a resume.
"""

import numpy as np


def accept_probability(utility: np.ndarray, lam: float) -> np.ndarray:
    """P(accept i) = (1 - lambda) + lambda * g_i."""
    return (1.0 - lam) + lam * np.asarray(utility, dtype=np.float64)


def draw_accepted(prob: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One Bernoulli draw per candidate: True where candidate i is accepted, with
    probability ``prob[i]``."""
    return rng.random(len(prob)) < prob
