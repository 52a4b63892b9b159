"""The figures of ``autoassist-diagnose``, from per-pair losses and token counts alone
(numpy and scipy, no fairseq): the oracle's and an Assistant's skipped shares of the
reducible and the raw loss, skip densities, the verdict (from noise shares) and the oracle
curve's rows. The reducible loss, the densities and the verdict's rule are explained in
diagnose.cli's docstring (the command's --help); research/ reuses them on
saved losses.
"""

import os

import numpy as np
from scipy.stats import spearmanr

REFERENCE_SHARE = 0.35
MAX_DENSITY = 0.5  # the density figures' reference line: information, not a verdict
# the verdict's bars on the share of noise pairs (EVIDENCE: the measurements behind them)
NOISE_BAR = 0.19   # noisy Multi30k: the pair checks flag 19.6% of it; filtering paid there
CLEAN_SHARE = 0.01  # clean Multi30k and Tatoeba: 0.8% and 0.9% flagged; nothing beat plain

# Each verdict's evidence, the one home of these figures in the code: the verdict prints
# it, and autoassist-diagnose --help lists it. Source: docs/results/converged (corpora
# multi30k-noisy and multi30k) and docs/results/noise (multi30k-realistic), as
# docs/benchmarks.md ("Can skipping pay here?") reproduces them.
EVIDENCE = {
    "filter": (
        "On Multi30k with 30% synthetic noise (copies, wrong-language and misaligned pairs; "
        "the checks flag 19.6% of the prepared pairs, 4,831 of 24,700, 4,719 of them noise) "
        "plain fairseq on the filtered corpus beat every AutoAssist arm at the same budget "
        "(0.7 B: 34.82 against 34.44 BLEU; 0.85 B: 35.73 against 34.91) and plain fairseq on "
        "the whole corpus at B (33.75), each with cosine to 0 at its budget."),
    "no": (
        "On the clean corpora measured (the checks flag 0.8% of Multi30k's pairs, 0.9% of "
        "Tatoeba de-en's) no skipping rule beat plain fairseq trained less with a schedule "
        "fitted to the budget, not even a near-oracle ranking (the history arm at 0.7 B: "
        "35.73 against 36.30 BLEU); REX ended below cosine to 0 in validation loss at every "
        "share of the budget measured."),
    "noise-rule": (
        "On Multi30k with 30% realistic synthetic noise (neighbours' targets, cut targets, "
        "boilerplate, copies, wrong-language targets; the checks flag 8.9% of the prepared "
        "pairs), two seeds with REX, the best schedule measured: the plugin's noise rule at "
        "0.85 B ended 1.1 BLEU above plain fairseq at 0.85 B, 0.4 above plain fairseq at B "
        "and 0.8 above plain fairseq on the filtered corpus at 0.85 B (35.69 against 34.56, "
        "35.26 and 34.85), at a validation loss 0.17 higher than plain fairseq's at 0.85 B. "
        "Much of that is output length: against plain fairseq at 0.85 B it led by 0.6-0.7 "
        "at equal length penalties and by 0.1 with each run's penalty chosen on the valid "
        "split; against plain fairseq at B it was level at equal penalties and 0.6 below "
        "with the penalty chosen on the valid split. With cosine it led plain "
        "fairseq at B by 1.3 (35.73 against 34.45). No real crawled corpus was trained at a "
        "budget."),
}


def data_pass(saved: dict, iterator_state: dict) -> int:
    """The data pass rank 0's stream was in at the save (the random rule's rate is per
    pass); fairseq's epoch, a batch count that may span two passes, only without a stream."""
    stream = (saved["ranks"][0] or {}).get("stream")
    if stream is not None and int(stream["generator"]["data_pass"]) >= 1:
        return int(stream["generator"]["data_pass"])
    return int(iterator_state.get("epoch", 1))


def oracle_skipped_loss(losses, ntok, token_share, rank_by=None):
    """Share of the summed token loss held by the easiest pairs with *token_share* of the
    tokens; "easiest" by *rank_by* (lowest first) when given, else by *losses* themselves
    (the oracle)."""
    order = np.argsort(losses if rank_by is None else rank_by)
    within = np.cumsum(ntok[order]) <= token_share * ntok.sum()
    token_loss = (losses * ntok)[order]
    return float(token_loss[within].sum() / token_loss.sum())


def reducible_losses(losses, floor):
    """Each pair's mean token loss above *floor* (clipped at 0: in eval mode no token can go
    below the floor, so only float rounding is clipped)."""
    return np.maximum(np.asarray(losses, dtype=np.float64) - floor, 0.0)


def skip_figures(assistant, losses, ntok, floor=0.0, ids=None):
    """g and Algorithm 1's P(accept) of every pair, and what its expected skips in one pass
    hold against the oracle's (the figures of this command and of replay_assistant.py).

    Args:
        assistant (Assistant): the Assistant to score.
        losses (np.ndarray): per-pair mean token loss of the Boss.
        ntok (np.ndarray): per-pair target tokens.
        floor (float, optional): the loss floor (``scoring.loss_floor``;
            default: 0.0).
        ids (np.ndarray, optional): the pairs' dataset ids (default: 0, 1, ...).

    Returns:
        (np.ndarray, np.ndarray, dict): g, P(accept), and the shares of the tokens, of the
        reducible loss and of the raw loss.
    """
    from ..assistant.acceptance import accept_probability

    ids = np.arange(len(losses)) if ids is None else np.asarray(ids)
    chunks = [ids[i:i + 16384] for i in range(0, len(ids), 16384)]
    g = np.concatenate([assistant.utility(c) for c in chunks])
    if assistant.hparams.rule == "paper" and assistant.suspect is None:
        accept = accept_probability(g, assistant.schedule.lam)  # Algorithm 1's, from the same g
    else:  # the other rules' P(accept) depends on more than g (pass, loss history, checks)
        accept = np.concatenate([assistant.accept_probability(c) for c in chunks])
    skip = 1 - accept  # expected skips per pair in one pass
    token_share = float((skip * ntok).sum() / ntok.sum())
    figures = {"spearman_g_loss": float(spearmanr(g, losses).statistic),
               "skipped_share_tokens": token_share}
    for name, values in (("reducible", reducible_losses(losses, floor)), ("raw", losses)):
        token_loss = values * ntok
        figures[f"skipped_share_{name}_loss"] = float((skip * token_loss).sum() / token_loss.sum())
        figures[f"oracle_skipped_share_{name}_loss"] = oracle_skipped_loss(values, ntok,
                                                                           token_share)
    return g, accept, figures


def density(loss_share, token_share):
    """Skipped loss share / skipped token share (None when nothing is skipped)."""
    return loss_share / token_share if token_share > 0 else None


def plan_commands(data="DATA", dynamics=None):
    """The commands behind the verdicts: (filter, plain, noise rule). *dynamics*: the two
    losses files of ``--dynamics``, added to the filter's command."""
    more = f" --dynamics {dynamics[0]} {dynamics[1]}" if dynamics else ""
    rex = "--user-dir autoassist_fairseq --lr-scheduler rex --max-update BUDGET"
    return (f"autoassist-filter {data}{more} --out FILTERED, then fairseq-train FILTERED "
            f"--task translation {rex}",
            f"fairseq-train {data} --task translation {rex}",
            f"fairseq-train {data} --task autoassist_translation --assistant-rule noise {rex}")


def verdict(noise_share_checks, noise_share_dynamics=None, noise_share=None,
            noise_bar=NOISE_BAR, clean_share=CLEAN_SHARE, data="DATA", dynamics=None):
    """What to train on this corpus at a fixed budget, from its estimated noise share (the
    rule: diagnose.cli's docstring; the measurements behind it: EVIDENCE). The skip
    densities play no part: at convergence no rule that skips easy pairs beat plain fairseq
    with a schedule fitted to the budget, whatever the density.

    Args:
        noise_share_checks (float or None): the share of the training pairs that the pair
            checks of the feature file flag (None: no feature file with pair checks).
        noise_share_dynamics (float or None): the share the training dynamics of two
            checkpoints flag (None: not given).
        noise_share (float or None): the share flagged by either (default: the checks' and
            the dynamics' larger share, where one of them is given).
        noise_bar (float, optional): the smallest share at which filtering was measured to
            pay (default: 0.19).
        clean_share (float, optional): the largest share measured on the clean corpora,
            where nothing beat plain fairseq (default: 0.01).
        data (str, optional): the data directory, for the commands (default: "DATA").
        dynamics (sequence of two str, optional): the ``--dynamics`` files, for the commands.

    Returns:
        (str, str, str or None): ``filter``, ``no``, ``noise-rule`` or ``no-estimate``, a
        sentence saying why, and the command to run (None where the figures do not say).
    """
    shares = [s for s in (noise_share_checks, noise_share_dynamics) if s is not None]
    if noise_share is None and shares:
        noise_share = max(shares)
    filter_cmd, plain_cmd, rule_cmd = plan_commands(data, dynamics if noise_share_dynamics
                                                    else None)
    if noise_share is None:
        return "no-estimate", ("no noise estimate: the data directory has no feature file with "
                               "pair checks (autoassist-features DATA --source-lang SRC "
                               "--target-lang TGT builds it) and no --dynamics were given; "
                               "skipping easy pairs did not pay at a fixed budget on any "
                               "corpus measured, whatever the skip density"), None
    parts = ([f"the pair checks flag {noise_share_checks:.1%}"]
             if noise_share_checks is not None else []) + \
        ([f"the training dynamics flag {noise_share_dynamics:.1%}"]
         if noise_share_dynamics is not None else [])
    flagged = " and ".join(parts) + " of the training pairs"
    if len(parts) > 1:
        flagged += f" ({noise_share:.1%} by either)"
    if noise_share >= noise_bar:
        by_dynamics = noise_share_checks is None or noise_share_checks < noise_bar
        caveat = (" The pairs the dynamics flag beyond the checks were not filtered in a "
                  "fixed-budget run." if by_dynamics else "")
        return "filter", (f"{flagged}, at least {noise_bar:.0%}: skipping pays here through "
                          f"the noise, not through easy pairs. {EVIDENCE['filter']}{caveat}"), \
            filter_cmd
    if noise_share <= clean_share:
        return "no", (f"{flagged}, no more than on the clean corpora measured: train plain "
                      f"fairseq with a schedule fitted to the budget. {EVIDENCE['no']}"), \
            plain_cmd
    return "noise-rule", (f"{flagged}: between the clean corpora's share ({clean_share:.0%}) "
                          f"and the synthetic noisy corpus's ({noise_bar:.0%}). Train both at "
                          f"the budget and compare. {EVIDENCE['noise-rule']}"), \
        f"{rule_cmd}; and {plain_cmd}"


def oracle_figures(losses, ntok, floor, reference_share):
    """The oracle's shares of the reducible and the raw loss at the reference token share
    and at 35% of the tokens, with the floor's share of the loss."""
    reducible = reducible_losses(losses, floor)
    figures = {"loss_floor": floor, "mean_loss": float(losses.mean()),
               "mean_reducible_loss": float(reducible.mean()),
               "floor_share_of_loss": float(floor * ntok.sum() / (losses * ntok).sum())}
    for name, values in (("reducible", reducible), ("raw", losses)):
        at_ref = oracle_skipped_loss(values, ntok, reference_share)
        figures[f"oracle_skipped_share_{name}_loss_at_reference"] = at_ref
        figures[f"oracle_skipped_share_{name}_loss_at_35pct_tokens"] = \
            oracle_skipped_loss(values, ntok, 0.35)
        suffix = "" if name == "reducible" else "_raw_loss"
        figures["skip_density_oracle" + suffix] = density(at_ref, reference_share)
        figures[f"kept_{name}_loss_ratio_oracle"] = (1 - at_ref) / (1 - reference_share)
    return figures


# the columns of the oracle curve (one row per checkpoint)
CURVE_KEYS = ("passes", "num_updates", "mean_loss", "mean_reducible_loss",
              "floor_share_of_loss", "oracle_skipped_share_reducible_loss_at_reference",
              "oracle_skipped_share_raw_loss_at_reference", "skip_density_oracle",
              "skip_density_oracle_raw_loss", "verdict")


def curve_row(result):
    """One checkpoint's row of the oracle curve."""
    return {"checkpoint": os.path.basename(result["checkpoint"]),
            **{k: result.get(k) for k in CURVE_KEYS}}
