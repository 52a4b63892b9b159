"""The figures of ``autoassist-diagnose``, from per-pair losses and token counts alone
(numpy and scipy, no fairseq): the oracle's and an Assistant's skipped shares of the
reducible and the raw loss, skip densities, the verdict and the oracle curve's rows. The
reducible loss, the densities and the verdict's rule are explained in
diagnose.cli's docstring (the command's --help); research/ reuses them on
saved losses.
"""

import os

import numpy as np
from scipy.stats import spearmanr

REFERENCE_SHARE = 0.35
MAX_DENSITY = 0.5
MIN_SKIP_SHARE = 0.05


def data_pass(saved: dict, iterator_state: dict) -> int:
    """The data pass rank 0's stream was in at the save (the random rule's rate is per
    pass); fairseq's epoch, a batch count that may span two passes, only without a stream."""
    stream = (saved["ranks"][0] or {}).get("stream")
    if stream is not None and int(stream["generator"]["epoch"]) >= 1:
        return int(stream["generator"]["epoch"])
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
    plain_paper = getattr(assistant.hparams, "rule", "paper") == "paper" \
        and getattr(assistant, "suspect", None) is None
    if plain_paper:
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


def verdict(oracle_density, assistant_density, assistant_token_share,
            max_density=MAX_DENSITY, min_skip_share=MIN_SKIP_SHARE):
    """Whether skipping can pay on this corpus (the rule: diagnose.cli's docstring).

    Args:
        oracle_density (float): the oracle's skip density (reducible loss) at the reference
            token share.
        assistant_density (float or None): the Assistant's skip density at its own share.
        assistant_token_share (float or None): the share of Boss tokens the Assistant skips
            (None: the checkpoint has no Assistant).
        max_density (float, optional): the oracle's largest density that can pay
            (default: 0.5).
        min_skip_share (float, optional): the smallest token share worth skipping
            (default: 0.05).

    Returns:
        (str, str): ``pays``, ``oracle-only`` or ``no``, and a sentence saying why.
    """
    assistant_max = (1 + max_density) / 2
    if oracle_density > max_density:
        return "no", (f"even an oracle skipping the easiest pairs removes {oracle_density:.2f} "
                      f"of their token share of the reducible loss (pays at <= "
                      f"{max_density:.2f}): the pairs have about equally much left to learn, "
                      "skipping cannot pay on this corpus and Boss")
    if assistant_token_share is None:
        return "oracle-only", (f"an oracle could skip with density {oracle_density:.2f}; this "
                               "checkpoint has no Assistant (plain --task translation)")
    if assistant_token_share < min_skip_share:
        return "oracle-only", (f"an oracle could skip with density {oracle_density:.2f}, but "
                               f"this Assistant skips only {assistant_token_share:.1%} of the "
                               f"Boss tokens (< {min_skip_share:.0%}): it has not taken over yet")
    if assistant_density is None:
        return "oracle-only", (f"an oracle could skip with density {oracle_density:.2f}; the "
                               "Assistant's own density is unknown (no skipped token scored)")
    if assistant_density > assistant_max:
        return "oracle-only", (f"an oracle could skip with density {oracle_density:.2f}, but the "
                               f"Assistant's skips hold {assistant_density:.2f} of their token "
                               f"share of the reducible loss (pays at <= {assistant_max:.2f}): "
                               "it does not find the easy pairs well enough")
    return "pays", (f"the easiest pairs hold little reducible loss (oracle density "
                    f"{oracle_density:.2f}) and the Assistant finds them (density "
                    f"{assistant_density:.2f} over {assistant_token_share:.1%} of the Boss tokens)")


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
