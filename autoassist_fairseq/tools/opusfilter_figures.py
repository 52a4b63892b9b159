"""The ``opusfilter`` block of ``autoassist-check-report``: OpusFilter's heuristic filters
(:mod:`.opusfilter_heuristics`) scored on the same mix and by the same figures as the checks
(:mod:`.check_figures`), side by side.
"""

import time
from typing import Dict, Tuple

import numpy as np

from .check_figures import VALID_SHARES, noise_auc, noise_found_at
from .labelled_pairs import AUC_NOISE, VALID
from .opusfilter_heuristics import heuristic_flags, heuristics


def opusfilter_report(labels: np.ndarray, src_lines, tgt_lines, src: str,
                      tgt: str) -> Tuple[dict, Dict[str, np.ndarray]]:
    """OpusFilter's heuristic filters (:mod:`.opusfilter_heuristics`) on the raw text of
    every pair of the mix: their parameters, each filter's and the union's flag rates per
    label (and A+L, V+F), the AUCs of each filter's flag and of the union's score (the number
    of filters that reject a pair), the union's ``noise_found_at_valid_share``, and the pairs
    the filters score a CPU second; and the union's ``flag`` and ``score`` of every pair
    (:func:`.check_figures.key_figures`'s *heuristics*, for the bootstrap)."""
    start = time.process_time()
    flags = heuristic_flags(src_lines, tgt_lines, src, tgt)
    seconds = time.process_time() - start
    count = np.sum([f.astype(np.float64) for f in flags.values()], axis=0)
    kinds = sorted(set(labels.tolist()))
    rate: Dict[str, Dict[str, float]] = {}
    for name, f in list(flags.items()) + [("union", count > 0)]:
        rate[name] = {k: float(f[labels == k].mean()) for k in kinds}
        for group in (AUC_NOISE, VALID):
            pick = np.isin(labels, group)
            rate[name]["+".join(group)] = float(f[pick].mean()) if pick.any() else float("nan")
    auc = {name: noise_auc(labels, f.astype(np.float64)) for name, f in flags.items()}
    auc["union"] = noise_auc(labels, count)
    block = {"parameters": dict(heuristics(src, tgt)), "flag_rate": rate, "auc": auc,
             "noise_found_at_valid_share": {
                 "union": {str(v): noise_found_at(labels, count, v)
                           for v in VALID_SHARES}},
             "pairs_per_cpu_second": len(labels) / max(seconds, 1e-9)}
    return block, {"flag": count > 0, "score": count}
