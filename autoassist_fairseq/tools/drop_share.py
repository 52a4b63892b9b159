"""``autoassist-filter --drop-share``: which pairs a share of the corpus drops, by rank.

The flagged pairs go first; the rest are ranked by the checks' combined evidence
(:func:`..checks.flags.union_score`). The scores must rank the share asked for:
where more pairs tie at the score at which the share ends than it still takes, the pairs
taken from the tie would be picked by their place in the corpus alone, and a share that
picks more than :data:`TIE_TOLERANCE` of its pairs that way is refused.
"""

import math

import numpy as np

# --drop-share: the share of the pairs dropped beyond the flagged ones that may be picked by
# their place in the corpus, where the noise scores tie at the share's boundary
TIE_TOLERANCE = 0.01


def ranked_drop(flags: np.ndarray, score: np.ndarray, drop_share: float,
                fix: str = "") -> np.ndarray:
    """The pairs that ``--drop-share`` drops: every flagged pair, then the unflagged pairs of
    the highest *score* up to round(*drop_share* x pairs) in all (one bool per pair).

    Raises:
        ValueError: the scores do not rank that share: more unflagged pairs tie at the score
            where it ends than it still takes, and those it would take from the tie (by their
            place in the corpus alone) are more than :data:`TIE_TOLERANCE` of the pairs it
            drops beyond the flagged ones, and more than one. The message gives the largest
            share the scores rank, and *fix*.
    """
    dropped = np.asarray(flags, dtype=bool).copy()
    num_pairs, num_flagged = len(dropped), int(dropped.sum())
    extra = int(round(drop_share * num_pairs)) - num_flagged
    if extra <= 0:
        return dropped
    rest = np.flatnonzero(~dropped)
    order = rest[np.argsort(-score[rest], kind="stable")]
    bar = score[order[extra - 1]]
    above = int(np.count_nonzero(score[rest] > bar))
    tied = int(np.count_nonzero(score[rest] == bar))
    by_place = extra - above  # taken from the tie at the boundary, in corpus order
    if tied > by_place and by_place > max(1.0, TIE_TOLERANCE * extra):
        ranked = math.floor((num_flagged + above) / num_pairs * 1e4) / 1e4
        limit = (f"give --drop-share {ranked:g} or less (the {num_flagged} flagged pairs and "
                 f"the {above} that score above the tie)" if above else
                 f"the scores rank no pair beyond the {num_flagged} flagged ones: leave out "
                 "--drop-share (the flagged pairs only)")
        raise ValueError(
            f"--drop-share {drop_share} cannot be ranked: {tied} of the {num_pairs} training "
            f"pairs ({tied / num_pairs:.0%}) tie at the noise score where the share ends (the "
            f"pair checks give them the same evidence), and {by_place} of them would be dropped "
            f"by their place in the corpus alone; {limit}{fix}")
    dropped[order[:extra]] = True
    return dropped
