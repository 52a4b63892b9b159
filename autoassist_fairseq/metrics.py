"""The ``aa_*`` statistics: what the Assistant reports, what every rank logs, how fairseq
combines them. The one contract between the Assistant's side (``Assistant.stats``, the
windows' counts) and the Boss's (the iterator's ``tasks.counters``, the task's logs).

Every rank logs every key of :data:`LOGGED` as ``"aa_" + key`` at every step, dummy
batches too: fairseq sums the logs of all ranks in one all-reduce that expects identical
keys everywhere. The keys are part of the user-facing logs (``research/bench`` reads
them): never rename one.
"""

import functools
from typing import Optional

import numpy as np

# per window, credited to the batches cut from it (``batch_stream``)
COUNTERS = ("considered_pairs", "considered_tokens", "accepted_pairs", "accepted_tokens")
# summed over the logging interval and the ranks
SUMMED = COUNTERS + ("boss_tokens", "boss_padded_tokens", "wait_seconds")
# the Assistant's state: averaged over the ranks that had a value ("n" counts them), logged
# under these names
AVERAGED = {"accuracy": "aa_acc", "chance": "aa_acc_base", "threshold": "aa_T",
            "lambda": "aa_lambda", "unlearnable": "aa_unlearnable"}
# summed, shown only when not zero
COUNTED = {"dropped_losses": "aa_dropped", "nonfinite": "aa_nonfinite"}
LOGGED = SUMMED + tuple(AVERAGED) + tuple(COUNTED) + ("failed", "n")
# cumulative over the run (all ranks) and across resumes: the train iterator's run_totals
# (``tasks.counters``), which its checkpoint state holds
RUN_TOTALS = ("boss_tokens", "boss_padded_tokens", "considered_tokens", "accepted_tokens")


def assistant_stats(threshold: float, lam: float, accuracy: float, chance: float,
                    loss_batches: int, nonfinite: int, unlearnable: int) -> dict:
    """The Assistant's statistics as they travel with every window and state reply
    (``nonfinite`` is cumulative; ``loss_batches`` counts the loss batches learned)."""
    return {"threshold": threshold, "lambda": lam, "accuracy": accuracy, "chance": chance,
            "loss_batches": loss_batches, "nonfinite": nonfinite, "unlearnable": unlearnable}


def logging_output(stats: dict, logging_output: dict) -> dict:
    """*logging_output* plus every ``aa_*`` key, from one step's *stats* (missing: 0)."""
    stats = dict(stats)
    if np.isfinite(stats.get("threshold", np.nan)):
        stats["n"] = 1  # averaged over workers: value sums plus a count
    else:  # no loss has reached the Assistant yet: nothing to average
        for key in AVERAGED:
            stats.pop(key, None)
    out = dict(logging_output)
    for key in LOGGED:
        out["aa_" + key] = float(stats.get(key, 0.0))
    return out


def reduce(logging_outputs, totals: Optional[dict], on_failure=None) -> Optional[dict]:
    """Log the ``aa_*`` metrics of one step's *logging_outputs* (all ranks) with fairseq's
    ``metrics``; the run's cumulative counts are read from *totals* when printed (the train
    iterator's ``run_totals``; ``None``: no train iterator, no cumulative counts).
    *on_failure* is called first when a rank's Assistant failed: the logs are summed over
    all ranks, so every rank stops at this same update. Returns the step's counts of
    :data:`RUN_TOTALS` summed over the ranks, which the caller adds to *totals*
    (``tasks.counters``); None where the logs were not a training step's (validation's
    hold no ``aa_*`` key)."""
    from fairseq import metrics

    if not any("aa_boss_tokens" in log for log in logging_outputs):
        return None

    def total(key):
        return float(sum(log.get(key, 0) for log in logging_outputs))

    if total("aa_failed") and on_failure is not None:
        on_failure()

    for key in SUMMED:
        metrics.log_scalar_sum("_aa_" + key, total("aa_" + key))
    metrics.log_derived("aa_accept_sent", functools.partial(
        _ratio, "_aa_accepted_pairs", "_aa_considered_pairs"))
    metrics.log_derived("aa_accept_tok", functools.partial(
        _ratio, "_aa_accepted_tokens", "_aa_considered_tokens"))
    metrics.log_derived("aa_wait_s", lambda meters: round(meters["_aa_wait_seconds"].sum, 3))
    n = total("aa_n")
    if n:
        for key, name in AVERAGED.items():
            metrics.log_scalar(name, total("aa_" + key) / n, n, round=3)
    for key, name in COUNTED.items():
        value = total("aa_" + key)
        if value:
            metrics.log_scalar_sum(name, value)
    summed = {key: total("aa_" + key) for key in RUN_TOTALS}
    if totals is None:
        return summed
    # cumulative over the run (and across resumes): read at print time. fairseq keeps the
    # first function logged under a name, so *totals* is one dict for the whole run
    metrics.log_derived("aa_boss_tok", lambda meters: int(totals["boss_tokens"]))
    # with padding: what the Boss's matrix products compute (batch size x longest sides)
    metrics.log_derived("aa_boss_padded_tok", lambda meters: int(totals["boss_padded_tokens"]))
    metrics.log_derived("aa_skip_tok", lambda meters: int(
        totals["considered_tokens"] - totals["accepted_tokens"]))
    return summed


def _ratio(num, den, meters):
    d = meters[den].sum
    return round(meters[num].sum / d, 4) if d else 1.0
