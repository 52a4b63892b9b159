"""The figures of the fixed-budget comparisons (research/fixed_budget.py): the budget B where
plain fairseq has converged, the summary.json that several sessions add to, the smallest
budget share at which an arm matches plain fairseq at B, and the README table.

    python -m research.fixed_budget_report --measure-budget RESULTS.json|train.log
        [--curve baseline-s1] [--threshold 0.01]

prints, for every validation of a plain run, the relative improvement of its validation
loss over the last fifth of training (the loss at 0.8 x its updates, linear between
validations, against its loss there) and the budgets that count as converged.
"""

import json
import sys
from pathlib import Path

from research.bench import BenchmarkError, doc_parser
from research.bench.logs import parse_log
from research.bench.metrics import value_at

SUMMARY_KEYS = ("corpus", "seed", "arm", "budget_share", "valid_loss", "valid_reducible_loss",
                "bleu", "boss_tokens", "schedule")
UNNAMED_SCHEDULE = "cosine"  # the schedule of rows and run folders that name none
BLEU_MARGIN = 0.3  # an arm matches plain fairseq at B with a test BLEU at most this much lower
TARGET_ARM = "plain"  # plain fairseq, schedule decaying to zero at B: the target
OWN_SCHEDULE_ARM = "plain-inverse-sqrt"  # the config's schedule, compared with cosine's target
TABLE_START = "<!-- fixed-budget table: written by research/fixed_budget.py -->"
TABLE_END = "<!-- end of fixed-budget table -->"


# -- the budget B --------------------------------------------------------------------------
def read_curve(path, name="baseline-s1"):
    """[(epoch, updates, valid_loss)] of a benchmark results.json's curve *name*, or of the
    validations of a fairseq train.log."""
    path = Path(path)
    if path.suffix == ".json":
        curves = json.loads(path.read_text()).get("curves", {})
        if name not in curves:
            raise BenchmarkError(f"{path} has no curve {name!r} (it has {sorted(curves)}): "
                                 "choose one with --curve")
        points = curves[name]
    else:
        points = [{"epoch": r["epoch"], "updates": r["num_updates"], "valid_loss": r["loss"]}
                  for r in parse_log(path.read_text()) if r["tag"] == "valid"]
    points = sorted(points, key=lambda p: p["updates"])
    if not points:
        raise BenchmarkError(f"{path}: no validation losses")
    return [(p["epoch"], int(p["updates"]), p["valid_loss"]) for p in points]


def last_fifth_improvements(curve):
    """Per validation (epoch, updates, loss), the relative improvement of the loss over the
    last fifth of a run stopped there: (L(0.8 u) - L(u)) / L(0.8 u), L linear between
    validations; None where 0.8 u comes before the first validation."""
    points = [{"updates": u, "valid_loss": loss} for _, u, loss in curve]
    out = []
    for epoch, updates, loss in curve:
        before = value_at(points, "updates", 0.8 * updates)
        out.append((epoch, updates, loss, None if before is None else (before - loss) / before))
    return out


def converged_budget(improvements, threshold=0.01):
    """(first, lasting): the first validation whose last-fifth improvement is below
    *threshold*, and the first from which every later one stays below it (None: not
    within the curve)."""
    first = next((row for row in improvements if row[3] is not None and row[3] < threshold),
                 None)
    lasting = None
    for row in reversed(improvements):
        if row[3] is None or row[3] >= threshold:
            break
        lasting = row
    return first, lasting


# -- summary.json --------------------------------------------------------------------------
def entry_schedule(entry):
    """The learning-rate schedule *entry*'s run trained with: its ``schedule``, or for a row
    without one, cosine (plain-inverse-sqrt's: inverse_sqrt, the config's own)."""
    if entry.get("schedule"):
        return entry["schedule"]
    return "inverse_sqrt" if entry["arm"] == OWN_SCHEDULE_ARM else UNNAMED_SCHEDULE


def target_schedule(entry):
    """The schedule of the plain fairseq run at B that *entry* is compared with: its own
    (plain-inverse-sqrt's: cosine, the comparison it was made for)."""
    schedule = entry_schedule(entry)
    return UNNAMED_SCHEDULE if schedule == "inverse_sqrt" else schedule


def entry_key(entry):
    return (entry["corpus"], entry["seed"], entry["arm"], round(entry["budget_share"], 4),
            entry_schedule(entry))


def run_name(arm, share, seed, schedule=UNNAMED_SCHEDULE):
    """A run's folder, and its key in runs-CORPUS.json: ARM-SHAREB-sSEED, and -SCHEDULE after
    it unless the schedule is cosine (so that runs of two schedules never share a folder)."""
    name = f"{arm}-{share:.2f}B-s{seed}"
    return name if schedule == UNNAMED_SCHEDULE else f"{name}-{schedule}"


def record_run(results, name, entry, args, curve):
    """Enter one finished run into the folder *results*: its summary *entry* merged into
    summary.json, its fairseq-train *args* and validation *curve* into runs-CORPUS.json under
    *name* (its :func:`run_name`), then the README table and curves-CORPUS.png redrawn.
    Returns the merged summary rows."""
    results = Path(results)
    rows = merge_summary(results / "summary.json", [entry])
    runs_path = results / f"runs-{entry['corpus']}.json"
    runs = json.loads(runs_path.read_text()) if runs_path.exists() else {}
    runs[name] = {"entry": entry, "args": [str(t) for t in args], "curve": curve}
    runs_path.write_text(json.dumps(runs, indent=2, sort_keys=True) + "\n")
    write_table(results / "README.md", rows)
    plot_runs(runs, results / f"curves-{entry['corpus']}.png")
    return rows


def merge_summary(path, entries):
    """Write *entries* into the summary list at *path*: an entry of the same corpus, seed,
    arm, budget share and schedule is replaced, every other one is kept (several sessions
    add to the file). An entry without a schedule gets :func:`entry_schedule`'s; rows
    already in the file stay as they are. Returns the merged list, sorted."""
    path = Path(path)
    old = json.loads(path.read_text()) if path.exists() else []
    entries = [dict(e, schedule=entry_schedule(e)) if "arm" in e else e for e in entries]
    for entry in entries:
        missing = [k for k in SUMMARY_KEYS if k not in entry]
        if missing:
            raise ValueError(f"summary entry {entry} lacks {missing}")
    merged = {entry_key(e): e for e in old}
    merged.update((entry_key(e), e) for e in entries)
    rows = sorted(merged.values(), key=lambda e: (e["corpus"], e["seed"], e["arm"],
                                                  e["budget_share"], entry_schedule(e)))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows, indent=2) + "\n")
    return rows


def matches(entry, target, margin=BLEU_MARGIN):
    """True when *entry* matches *target* (plain fairseq at B): validation loss no higher,
    test BLEU no more than *margin* below (None when a BLEU is missing)."""
    if entry["valid_loss"] > target["valid_loss"]:
        return False
    if entry["bleu"] is None or target["bleu"] is None:
        return None
    return entry["bleu"] >= target["bleu"] - margin


def matching_shares(rows, margin=BLEU_MARGIN, schedule=UNNAMED_SCHEDULE):
    """{(corpus, seed, arm): the smallest measured budget share at which the arm matches
    plain fairseq at B of its corpus and seed} within the comparison of one *schedule*
    (rows of other schedules are left out; see :func:`target_schedule`). None: no share
    measured matches, or a BLEU is missing where the loss matches. The target matches
    itself: plain fairseq's share is 1.0 unless a smaller one matches."""
    rows = _compared(rows, schedule)
    targets = _targets(rows)
    out = {}
    for e in sorted(rows, key=lambda e: e["budget_share"]):
        target = targets.get((e["corpus"], e["seed"]))
        key = (e["corpus"], e["seed"], e["arm"])
        if target is None:
            continue
        out.setdefault(key, None)
        if out[key] is None and matches(e, target, margin):
            out[key] = e["budget_share"]
    return out


def _compared(rows, schedule):
    """The rows of the comparison under *schedule*: its arms and their target."""
    return [e for e in rows if target_schedule(e) == schedule]


def _targets(rows):
    """{(corpus, seed): the entry of plain fairseq at B} (rows of one schedule)."""
    return {(e["corpus"], e["seed"]): e for e in rows
            if e["arm"] == TARGET_ARM and abs(e["budget_share"] - 1.0) < 1e-9}


def fmt(value, spec):
    return "n/a" if value is None else format(value, spec)


def _match_text(match):
    """The table's last column: the smallest matching share, or why there is none."""
    if isinstance(match, str):
        return match
    return "no measured share" if match is None else f"{match:.2f} B"


def summary_table(rows):
    """Markdown: one row per run, with the smallest matching share of its arm within its
    schedule's comparison (an arm of a comparison under another schedule than cosine is
    named with the schedule)."""
    schedules = {target_schedule(e) for e in rows}
    shares = {s: matching_shares(rows, schedule=s) for s in schedules}
    targets = {s: _targets(_compared(rows, s)) for s in schedules}
    lines = ["| corpus | seed | arm | budget share | updates | valid loss | reducible | "
             "test BLEU | Boss tokens | wall (s) | other CPU | matches plain at B from |",
             "|" + "---|" * 12]
    for e in rows:
        schedule = target_schedule(e)
        match = "(target)" if targets[schedule].get((e["corpus"], e["seed"])) is e else \
            shares[schedule].get((e["corpus"], e["seed"], e["arm"]))
        arm = e["arm"] if schedule == UNNAMED_SCHEDULE else f"{e['arm']} ({schedule})"
        lines.append(
            f"| {e['corpus']} | {e['seed']} | {arm} | {e['budget_share']:.2f} | "
            f"{fmt(e.get('updates'), 'd')} | {e['valid_loss']:.3f} | "
            f"{e['valid_reducible_loss']:.3f} | {fmt(e['bleu'], '.2f')} | "
            f"{e['boss_tokens'] / 1e6:.3f}M | {fmt(e.get('wall_s'), '.0f')} | "
            f"{fmt(e.get('other_cpu_share'), '.1%')} | "
            f"{_match_text(match)} |")
    signatures = sorted({e["bleu_signature"] for e in rows if e.get("bleu_signature")})
    return "\n".join(lines + [""] + [f"sacreBLEU signature: `{s}`" for s in signatures])


def write_table(readme, rows):
    """Put the table between its markers in *readme* (other sections stay as they are);
    a README without the markers gets them, under a "Fixed-budget comparisons" heading."""
    readme = Path(readme)
    text = readme.read_text() if readme.exists() else "# Converged regime\n"
    block = f"{TABLE_START}\n{summary_table(rows)}\n{TABLE_END}"
    if TABLE_START in text and TABLE_END in text:
        head, rest = text.split(TABLE_START, 1)
        text = head + block + rest.split(TABLE_END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n## Fixed-budget comparisons\n\n" + block + "\n"
    readme.write_text(text)


def plot_runs(runs, path):
    """Validation loss against updates and against Boss tokens, one line per run of
    runs-CORPUS.json ({run name: {"curve": [...]}}), the target dashed."""
    import logging

    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for name, run in sorted(runs.items()):
        curve = [p for p in run["curve"] if p.get("boss_tokens") is not None]
        style = "--" if name.startswith(f"{TARGET_ARM}-1.00B") else "-"
        for ax, key in zip(axes, ("updates", "boss_tokens")):
            ax.plot([p[key] for p in curve], [p["valid_loss"] for p in curve], style,
                    marker="o", ms=2, label=name)
    for ax, label in zip(axes, ("updates", "Boss tokens (non-padding src+tgt)")):
        ax.set_xlabel(label)
        ax.set_ylabel("validation loss (base 2)")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None):
    p = doc_parser(__doc__, 1)
    p.add_argument("--measure-budget", required=True, type=Path,
                   help="a benchmark results.json or a fairseq train.log of a plain run")
    p.add_argument("--curve", default="baseline-s1", help="the curve of a results.json")
    p.add_argument("--threshold", type=float, default=0.01,
                   help="relative improvement over the last fifth that counts as converged")
    a = p.parse_args(argv)
    rows = last_fifth_improvements(read_curve(a.measure_budget, a.curve))
    print("| epoch | updates | valid loss | improvement over the last fifth |\n|---|---|---|---|")
    for epoch, updates, loss, gain in rows:
        print(f"| {epoch} | {updates} | {loss:.3f} | {fmt(gain and 100 * gain, '.2f')}% |")
    first, lasting = converged_budget(rows, a.threshold)
    print(f"first below {a.threshold:.1%}: " + (f"epoch {first[0]} ({first[1]} updates)"
                                                if first else "none"))
    print(f"below {a.threshold:.1%} from there to the end: "
          + (f"epoch {lasting[0]} ({lasting[1]} updates)" if lasting else
             f"none within the curve (it ends at epoch {rows[-1][0]}, {rows[-1][1]} updates)"))


if __name__ == "__main__":
    try:
        main()
    except BenchmarkError as err:
        sys.exit(f"fixed_budget_report.py: error: {err}")
