"""The benchmark's outputs besides results.json: results.md (the equal-compute table of
every arm, the noise report by kind) and curves.png."""

import shlex
from pathlib import Path

from .metrics import BLEU_MARGIN

BLEU_KEPT = "kept by the config"  # results' bleu_checkpoints under --bleu-kept


def plot_curves(curves, bleu_curves, per_seed, path, arms):
    """Validation loss (and test BLEU, when measured) against Boss tokens and against wall
    time, every arm in the same plot (cf. the paper's Fig. 4)."""
    import logging

    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [("valid_loss", curves, "validation loss (base 2)")]
    if any(bleu_curves.values()):
        rows.append(("bleu", bleu_curves, "test BLEU"))
    fig, axes = plt.subplots(len(rows), 2, figsize=(11, 4.2 * len(rows)), squeeze=False)
    styles = ["-", "--", ":", "-."]
    colors = {arm: f"C{i}" for i, arm in enumerate(arms)}
    for r, (value, source, ylabel) in enumerate(rows):
        for c, (key, xlabel) in enumerate((("boss_tokens", "Boss tokens (non-padding src+tgt)"),
                                           ("wall", "wall-clock time (s)"))):
            ax = axes[r][c]
            for i, s in enumerate(per_seed):
                for arm in arms:
                    pts = [p for p in source.get(f"{arm}-s{s['seed']}", []) if p[key] is not None]
                    if pts:
                        ax.plot([p[key] for p in pts], [p[value] for p in pts], marker="o",
                                ms=3, color=colors[arm], ls=styles[i % 4],
                                label=f"{arm} (seed {s['seed']})")
                target = s["target_loss"] if value == "valid_loss" else s.get("target_bleu")
                if target is not None:
                    ax.axhline(target, color="gray", ls="--", lw=1, label=(
                        "target: baseline best" if value == "valid_loss" else
                        f"target: baseline final - {BLEU_MARGIN}") if i == 0 else None)
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel)
            ax.grid(alpha=0.3)
        axes[r][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def fmt(value, spec=".3f"):
    """A table cell: the value formatted, or 'n/a'."""
    return "n/a" if value is None else format(value, spec)


def fmt_tokens(value):
    """A token count in millions, to the thousand tokens (7.048M): arms often differ by less
    than the 1% that three significant digits would show."""
    return "n/a" if value is None else f"{value / 1e6:.3f}M"


def arm_rows(arms_of_seed, label):
    """Markdown rows of the equal-compute table for one seed (or the means)."""
    rows = []
    for arm, m in arms_of_seed.items():
        noise = m.get("noise") or {}
        rows.append(
            f"| {label} | {arm} | {fmt(m.get('epochs_trained'), '.2f')} | "
            f"{fmt(m['final']['updates'], '.0f')} | {fmt_tokens(m['final']['boss_tokens'])} | "
            f"{fmt(m['final']['wall'], '.0f')} | {fmt(m['valid_loss_at_equal_tokens'])} | "
            f"{fmt(m['valid_loss_at_equal_wall'])} | {fmt(m['bleu_at_equal_tokens'], '.2f')} | "
            f"{fmt(m['bleu_at_equal_wall'], '.2f')} | "
            f"{fmt(m['tokens_to_target_loss_ratio'])} / {fmt(m['wall_to_target_loss_ratio'])} | "
            f"{fmt(m['tokens_to_target_bleu_ratio'])} / {fmt(m['wall_to_target_bleu_ratio'])} | "
            f"{fmt(m.get('other_cpu_share'), '.1%')} | {fmt(noise.get('skipped'), '.1%')} / "
            f"{fmt(noise.get('trained'), '.1%')} |")
    return rows


def per_seed_arm(per_seed, seed, arm):
    """The figures of *arm* in *seed*'s row of *per_seed* ({} if absent)."""
    return next((s["arms"].get(arm) or {} for s in per_seed if s["seed"] == seed), {})


def noise_kind_rows(per_seed):
    """Markdown table: per seed and Assistant arm, the share of each label's tokens (clean
    and every noise kind) its last checkpoint would skip, with the kind's mean raw and
    reducible loss, and the share of the reducible loss its skips would remove."""
    found = [(s["seed"], arm, a["noise_by_kind"]) for s in per_seed
             for arm, a in s["arms"].items() if a.get("noise_by_kind")]
    if not found:
        return []
    kinds = sorted({k for *_, by_kind in found for k in by_kind})
    shares = any(a.get("skipped_share_reducible_loss") is not None
                 for s in per_seed for a in s["arms"].values())
    rows = ["", "## Tokens skipped by noise kind", "",
            "Share of each kind's tokens the arm's last checkpoint would skip (mean Boss "
            "loss of its pairs in brackets, raw / reducible: above the label-smoothing floor; "
            "when the feature file has pair checks, also the share of its pairs the checks "
            "flag), and the share of the reducible loss its skips would remove (density: that "
            "share / the skipped token share), from research.noise_report.", "",
            "| seed | arm | " + " | ".join(kinds) + (" | reducible loss skipped (density) |"
                                                     if shares else " |"),
            "|" + "---|" * (len(kinds) + 2 + shares)]

    def cell(kind):
        flags = kind.get("pair_checks_flagged")
        flags = "" if flags is None else f"; {fmt(flags, '.1%')} flagged"
        reducible = kind.get("mean_reducible_loss")  # absent from older diagnoses
        reducible = "" if reducible is None else f" / {reducible:.2f}"
        return f"{fmt(kind['skipped_share'], '.1%')} ({kind['mean_loss']:.2f}{reducible}{flags})"

    for seed, arm, by_kind in found:
        cells = [cell(by_kind[k]) if k in by_kind else "n/a" for k in kinds]
        if shares:
            skips = per_seed_arm(per_seed, seed, arm)
            cells.append(f"{fmt(skips.get('skipped_share_reducible_loss'), '.1%')} "
                         f"({fmt(skips.get('skip_density'), '.2f')})")
        rows.append(f"| {seed} | {arm} | " + " | ".join(cells) + " |")
    return rows




NOTES = ("Equal compute: the baseline trains first (the config's --max-epoch, or the "
         "budget given); every other arm gets --max-update = the baseline's final update "
         "count and no --max-epoch, so update-counting LR schedules are the same in every arm "
         "and, with batches filled to --max-tokens, the Boss tokens are about equal (the "
         "table gives the actual ones). Boss tokens = non-padding source+target tokens (EOS "
         "included) through forward/backward: an Assistant arm's from `aa_boss_tok` in its "
         "log, the baseline's recomputed from the train set with fairseq's batching. Wall = "
         "fairseq's `wall` (whole seconds since the start of training, validations and "
         "checkpoint saves included) on the train line of the validation's epoch. Equal tokens "
         "/ equal wall = the smallest final Boss tokens / wall of the seed's arms; values "
         "there are linear between the measurements around them. Target loss = the "
         "baseline's best validation loss; target BLEU = the baseline's final test BLEU "
         f"minus {BLEU_MARGIN}; tokens/wall to a target = where the curve first reaches it, "
         "linear between the measurement before and the first one at or past it (ratios: "
         "arm / baseline). BLEU: scripts/evaluate.sh (beam 4, detokenised sacreBLEU, test "
         "set) on every epoch checkpoint, every checkpoint saved at a validation inside an "
         "epoch and the last checkpoint (sacreBLEU signatures in "
         "OUT/<run>/checkpoints/bleu-*.log). The random arm accepts at AutoAssist's "
         "measured token acceptance of each data pass (its \"AutoAssist data pass\" log "
         "lines; logs of older versions: `aa_accept_tok` per epoch). Pace = wall seconds per "
         "million Boss tokens over the whole run. Other CPU = the share of the machine's CPU time "
         "(/proc/stat) used by processes outside the run while it trained: above a few "
         "percent, its wall times are slowed by other work. Noise skipped / trained = the "
         "share of noisy Boss tokens among those the arm's last Assistant would skip / train "
         "(research.noise_report; the baseline trains the corpus share); its loss shares are "
         "of the reducible loss (the label-smoothed loss minus its floor). Means "
         "are n/a when a seed has no value.")



def write_markdown(results, path):
    """results.md: the equal-compute table of every arm (one row per seed and arm, then the
    means), the noise report by kind, each arm's pace and the other CPU during its run."""
    m = results
    rows = ["## Every arm at equal compute", "",
            f"Budget: {m['budget']}", "",
            "| seed | arm | epochs | updates | Boss tokens | wall (s) | loss @ equal tokens | "
            "loss @ equal wall | BLEU @ equal tokens | BLEU @ equal wall | to target loss: "
            "tokens / wall vs base | to base BLEU - 0.2: tokens / wall vs base | other CPU | "
            "noise skipped / trained |", "|" + "---|" * 14]
    for s in results["per_seed"]:
        rows += arm_rows(s["arms"], s["seed"])
    rows += arm_rows(results["arms"], "**mean**")
    rows += noise_kind_rows(results["per_seed"])
    machine = ", ".join(f"{k} {v}" for k, v in m["machine"].items())
    title = "# Equal-compute benchmark" + (f" (variant {m['variant']}: "
                                           f"`{shlex.join(m['autoassist_args'])}`)"
                                           if m.get("variant") else "")
    per_arm = [(s["seed"], arm, a) for s in results["per_seed"] for arm, a in s["arms"].items()]
    pace = [f"{arm} (seed {seed}) {fmt(a.get('wall_per_mtok'), '.1f')}" for seed, arm, a in per_arm]
    other = [f"{arm} (seed {seed}) {fmt(a.get('other_cpu_share'), '.1%')}"
             for seed, arm, a in per_arm]
    rows += ["", "Wall seconds per million Boss tokens: " + ", ".join(pace) + ".",
             "", "Other CPU during the runs: " + ", ".join(other) + "."]
    arms = [f"- `{arm}`: `{shlex.join(a['args'])}`" for arm, a in m["arm_args"].items()]
    text = [title, "", f"Date: {m['date']}  ", f"Machine: {machine}  ",
            f"Config: `{m['config']}`, data: `{m['data']}`", "", "```", shlex.join(m["command"]),
            "```", "", "Arms (flags beyond the config):", *arms, "", *rows, "", m["notes"], ""]
    if m.get("bleu_checkpoints") == BLEU_KEPT:
        text[-1:-1] = ["BLEU here (--bleu-kept): on the checkpoints the config kept (its last "
                       "epochs) only; tokens and wall to the target BLEU are not reported.", ""]
    Path(path).write_text("\n".join(text))
