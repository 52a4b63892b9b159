"""Pure figures of the curves: values at equal tokens and equal wall, where a curve first
reaches a target (linear between measurements), one arm against its seed's baseline, and
means over seeds."""

BLEU_MARGIN = 0.2  # the target BLEU: the baseline's final BLEU minus this


def ratio(a, b):
    """a / b, or None when either is missing or b is 0."""
    return a / b if a is not None and b else None



def seconds_per_mtok(point):
    """Wall seconds per million Boss tokens up to a curve point (None if unknown): the
    Boss's pace (the Assistant's CPU use would show here as a slower arm)."""
    return ratio(point["wall"], point["boss_tokens"] and point["boss_tokens"] / 1e6)


def mean(values):
    """Mean, or None when any value is missing (e.g. a seed that did not reach the target)."""
    return sum(values) / len(values) if values and None not in values else None



def value_at(points, key, x, value="valid_loss"):
    """*value* of *points* at points[key] == x, linear between measurements (None outside)."""
    pts = [(p[key], p[value]) for p in points if p.get(key) is not None]
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if x0 <= x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0) if x1 > x0 else y1
    return pts[0][1] if len(pts) == 1 and pts[0][0] == x else None


def crossing(points, key, target, value="valid_loss", lower_is_better=True):
    """points[key] where *value* first reaches *target*, linear between the measurement
    before and the first one at or past it; the first measurement if that one already is
    (None if never reached)."""
    sign = 1 if lower_is_better else -1
    pts = [(p[key], sign * p[value]) for p in points if p.get(key) is not None]
    goal = sign * target
    for i, (x, y) in enumerate(pts):
        if y <= goal:
            if i == 0:
                return x
            x0, y0 = pts[i - 1]
            return x0 + (x - x0) * (y0 - goal) / (y0 - y) if y0 != y else x
    return None


def arm_metrics(curve, bleus, base_curve, base_bleus, equal_tokens, equal_wall,
                bleu_from_start=True):
    """One arm's figures against its seed's baseline (the baseline's own included). Without
    *bleu_from_start* (the BLEU curves cover only the last checkpoints kept) the tokens and
    wall to the target BLEU are None: a curve already past the target at its first point
    would report that point, not where the run first reached it."""
    target_loss = min(p["valid_loss"] for p in base_curve)
    final_bleu = base_bleus[-1]["bleu"] if base_bleus else None
    target_bleu = None if final_bleu is None else final_bleu - BLEU_MARGIN
    cross_bleus, cross_base = (bleus, base_bleus) if bleu_from_start else ([], [])
    end = curve[-1]
    out = {"final": {k: end[k] for k in ("epoch", "updates", "boss_tokens", "wall",
                                          "valid_loss")},
           "final_bleu": bleus[-1]["bleu"] if bleus else None,
           "wall_per_mtok": seconds_per_mtok(end),
           "equal_tokens": equal_tokens, "equal_wall": equal_wall,
           "valid_loss_at_equal_tokens": value_at(curve, "boss_tokens", equal_tokens),
           "valid_loss_at_equal_wall": value_at(curve, "wall", equal_wall),
           "bleu_at_equal_tokens": value_at(bleus, "boss_tokens", equal_tokens, "bleu"),
           "bleu_at_equal_wall": value_at(bleus, "wall", equal_wall, "bleu"),
           "target_loss": target_loss, "target_bleu": target_bleu,
           "tokens_to_target_loss": crossing(curve, "boss_tokens", target_loss),
           "wall_to_target_loss": crossing(curve, "wall", target_loss),
           "tokens_to_target_bleu": None if target_bleu is None else crossing(
               cross_bleus, "boss_tokens", target_bleu, "bleu", lower_is_better=False),
           "wall_to_target_bleu": None if target_bleu is None else crossing(
               cross_bleus, "wall", target_bleu, "bleu", lower_is_better=False)}
    base = {"tokens_to_target_loss": crossing(base_curve, "boss_tokens", target_loss),
            "wall_to_target_loss": crossing(base_curve, "wall", target_loss),
            "tokens_to_target_bleu": None if target_bleu is None else crossing(
                cross_base, "boss_tokens", target_bleu, "bleu", lower_is_better=False),
            "wall_to_target_bleu": None if target_bleu is None else crossing(
                cross_base, "wall", target_bleu, "bleu", lower_is_better=False)}
    for key, value in base.items():
        out[key + "_ratio"] = ratio(out[key], value)
    return out



def mean_arms(per_seed):
    """Per arm, the mean over seeds of each figure (None when a seed has none)."""
    arms = {}
    for arm in per_seed[0]["arms"]:
        rows = [s["arms"][arm] for s in per_seed if arm in s["arms"]]
        m = {k: mean([r[k] for r in rows]) for k, v in rows[0].items()
             if isinstance(v, (int, float)) or v is None}
        m["final"] = {k: mean([r["final"][k] for r in rows]) for k in rows[0]["final"]}
        if "noise" in rows[0]:
            m["noise"] = {k: mean([(r["noise"] or {}).get(k) for r in rows])
                          for k in ("skipped", "trained", "corpus")}
        arms[arm] = m
    return arms

