"""How far a report's figures would move on another sample drawn the same way: a bootstrap
over the sample's rows (Efron & Tibshirani 1993).

For each figure: the standard deviation over resamples of the rows with replacement, the
2.5 and 97.5 percentiles, and ``two_samples_95`` = 1.96 x sqrt(2) x sd, the difference
between two independent samples of the same size that is exceeded with a probability of about
5% (normal approximation). A figure that a resample cannot compute (NaN: e.g. no pair of a
label drawn) is left out of that resample.
"""

from typing import Callable, Dict

import numpy as np


def bootstrap(statistic: Callable[[np.ndarray], Dict[str, float]], rows: int,
              replicates: int = 1000, seed: int = 0) -> Dict[str, Dict[str, float]]:
    """*statistic(index)* (a dict of figures of the rows *index*, drawn from ``range(rows)``)
    over *replicates* resamples; per figure: ``sd``, ``low`` and ``high`` (the 2.5 and 97.5
    percentiles), ``two_samples_95`` and the number of ``replicates`` that computed it."""
    if replicates < 2 or rows < 1:
        raise ValueError(f"a bootstrap needs at least 2 replicates and 1 row (got {replicates} "
                         f"and {rows})")
    rng = np.random.default_rng(seed)
    draws: Dict[str, list] = {}
    for _ in range(replicates):
        for name, value in statistic(rng.integers(0, rows, size=rows)).items():
            draws.setdefault(name, []).append(value)
    out = {}
    for name, values in draws.items():
        values = np.asarray(values, dtype=np.float64)
        values = values[~np.isnan(values)]
        if len(values) < 2:
            continue
        sd = float(values.std(ddof=1))
        out[name] = {"sd": sd, "low": float(np.percentile(values, 2.5)),
                     "high": float(np.percentile(values, 97.5)),
                     "two_samples_95": 1.96 * np.sqrt(2.0) * sd, "replicates": len(values)}
    return out
