#!/usr/bin/env python3
"""Fixed-budget comparisons: every arm trains a share of a budget of B updates with a
learning rate that decays to zero at the arm's own budget.

    python -m research.fixed_budget --data DIR --config NAME --corpus NAME --work DIR
        (--budget-epochs N | --budget-updates N) [--seed S ...] [--arms ARM@SHARE,...]
        [--schedule cosine|linear|rex] [--rule NAME="ARGS" ...] [--listed-only]
        [--inverse-sqrt-run DIR]
        [--async] [--skip-bleu]
        [--extra-args "..."] [--assistant-args "..."] [--results DIR]
    python -m research.fixed_budget --measure-budget RESULTS.json|train.log [--curve NAME]

Arms (ARM@SHARE trains round(SHARE x B) updates, ``--max-update``):

* ``plain``: ``--task translation`` with the ``--schedule``: the config's warm-up
  (--warmup-updates from --warmup-init-lr) to its peak --lr, then a decay to 0 at the arm's
  --max-update. ``rex`` (default): the plugin's ``--lr-scheduler rex --min-lr 0`` (Chen et
  al., MLSys 2022); ``cosine``: fairseq's half cosine down to --min-lr 0 (its period is
  --max-update minus the warm-up; the schedule of every comparison before REX);
  ``linear``: fairseq's ``polynomial_decay --power 1 --end-learning-rate 0
  --total-num-update`` the arm's --max-update (its warm-up starts from 0: it has no
  --warmup-init-lr);
* ``default``: ``--task autoassist_translation`` with the plugin's defaults, same schedule;
* ``random``: the random-skip control, same schedule, at the per-pass token acceptance of
  the ``default`` run at the same share (its pass log, ``passes.jsonl``), which must
  have finished first;
* a ``--rule NAME="ARGS"``: ``--task autoassist_translation`` plus ARGS, same schedule;
* ``plain-inverse-sqrt``: the config's own schedule over B (the earlier tables' baseline);
* ``plain-checked``: ``plain`` on the corpus without the pairs its pair checks flag
  (``autoassist-filter``, written once to WORK/CORPUS/filtered-data), what a user gets who
  filters with the checks instead of training AutoAssist;
* ``plain-opusfilter``: ``plain`` on the corpus without the pairs that any of OpusFilter's
  common heuristic filters rejects (the set of ``autoassist-check-report``'s ``opusfilter``
  block, on DATA/raw's text; written once to WORK/CORPUS/opusfilter-data);
* ``two-stage``: train briefly, filter by the training dynamics, train on: ``plain`` on the
  whole corpus for ``--two-stage-passes`` K passes (stage1/), every pair's loss at its
  checkpoints 1 and K (``autoassist-diagnose --losses-out``), the corpus without the pairs
  that the checks or the dynamics between them flag (``autoassist-filter --dynamics``), then
  the same run continued on it (``--continue-once`` checkpoint K) to the arm's --max-update.
  The two scoring forward passes over the corpus count as 2/3 of a pass of updates (a
  forward is about a third of a training step's work), taken off its --max-update; its Boss
  tokens count them as 2/3 of a pass's tokens.

Every Assistant arm runs in deterministic mode (``--assistant-sync``; ``--async`` leaves
it off). B: ``--budget-epochs N`` is N epochs of fairseq's batches of the train set
(measured here), ``--budget-updates N`` is N updates. Each run lives in
WORK/CORPUS/ARM-SHAREB-sSEED, with a ``-SCHEDULE`` suffix unless the schedule is cosine
(train.log, checkpoints/, cpu.json); rerunning the command
continues unfinished runs from their checkpoint_last.pt and reuses finished ones, so the
comparison can span several sessions. After each run, its figures (final validation
loss, its reducible part, test BLEU of checkpoint_last.pt with its sacreBLEU signature,
Boss tokens, wall, other CPU, the schedule) are merged into RESULTS/summary.json and the table in
RESULTS/README.md (with each arm's smallest budget share that matches plain at B); the
runs' flags and validation curves go to RESULTS/runs-CORPUS.json and curves-CORPUS.png.
"""

import math
import re
import shlex
import signal
import sys
from pathlib import Path

from research import fixed_budget_report as report
from research.fixed_budget_report import run_name
from research.bench import REPO, USER_DIR, BenchmarkError, doc_parser
from research.bench.budgets import baseline_batches, baseline_tokens_at, budget_updates
from research.bench.cli import parse_arm
from research.bench.filtered_data import checked_data, opusfilter_data
from research.bench.flags import KEEP_EPOCH_FLAGS, build_run_args, data_langs, drop_flags, \
    find_config, get_flag, read_args_file
from research.bench.logs import PASS_LOG, build_curve, parse_log, random_rates, read_passes
from research.bench.runs import other_cpu_share, run_bleu, run_training
from research.run_reuse import reusable_run

DEFAULT_ARMS = "plain@1.0,default@0.7,plain@0.7,random@0.7,default@0.55,default@0.85," \
               "plain-inverse-sqrt@1.0"  # most informative first
RULE_SHARES = (0.55, 0.7, 0.85)
PLAIN_ARMS = ("plain", "plain-inverse-sqrt", "plain-checked", "plain-opusfilter", "two-stage")
# a forward pass is about a third of a training step's work (forward + backward)
FORWARD_SHARE = 1 / 3
SYNC = ["--assistant-sync"]
SCHEDULES = ("cosine", "linear", "rex")  # every one decays to 0 at the arm's --max-update
# REX ends below cosine in validation loss at every share of B measured, on both seeds
# (docs/results/schedules): every arm of a comparison trains with it unless told otherwise
DEFAULT_SCHEDULE = "rex"
# the config's schedule flags, replaced by the chosen schedule's
SCHEDULE_FLAGS = {"--lr-scheduler", "--min-lr", "--lr-period-updates", "--t-mult", "--lr-shrink",
                  "--end-learning-rate", "--power", "--total-num-update", "--force-anneal"}


def parse_arms(text, rules=(), listed_only=False):
    """'ARM@SHARE,...' -> [(arm, share)], in the order given; a rule named by --rule runs
    at RULE_SHARES after them unless listed here or *listed_only*."""
    known = {*PLAIN_ARMS, "default", "random", *rules}
    arms = []
    for item in filter(None, (s.strip() for s in text.split(","))):
        arm, sep, share = item.partition("@")
        try:
            value = float(share)
        except ValueError:
            value = None
        if not sep or arm not in known or value is None or not 0 < value <= 2:
            raise BenchmarkError(f"--arms {item!r}: expected ARM@SHARE with ARM one of "
                                 f"{sorted(known)} and SHARE in (0, 2], e.g. default@0.7")
        arms.append((arm, value))
    named = {a for a, _ in arms}
    if listed_only:
        return arms
    return arms + [(rule, s) for rule in rules if rule not in named for s in RULE_SHARES]


def schedule_tokens(config_tokens, schedule=DEFAULT_SCHEDULE, max_update=None):
    """The config with its --lr-scheduler replaced by *schedule* (one of SCHEDULES), down to
    0 at --max-update (*max_update*: the arm's, which ``linear`` names again as its
    --total-num-update); the warm-up (--warmup-updates, and --warmup-init-lr but for
    ``linear``, whose warm-up starts from 0) and peak --lr are kept."""
    if schedule not in SCHEDULES:
        raise BenchmarkError(f"--schedule {schedule!r}: expected one of {', '.join(SCHEDULES)}")
    if get_flag(config_tokens, "--lr") is None:
        raise BenchmarkError(f"the config has no --lr: the {schedule} schedule needs its peak")
    tokens = drop_flags(config_tokens, SCHEDULE_FLAGS)
    if schedule == "linear":
        if max_update is None:
            raise BenchmarkError("the linear schedule needs the arm's --max-update")
        # polynomial_decay has no --warmup-init-lr: fairseq would refuse the flag
        return drop_flags(tokens, {"--warmup-init-lr"}) + [
            "--lr-scheduler", "polynomial_decay", "--power", "1", "--end-learning-rate", "0",
            "--total-num-update", str(max_update)]
    return tokens + ["--lr-scheduler", schedule, "--min-lr", "0"]


def arm_schedule(arm, ctx):
    """The schedule *arm* trains with: the comparison's, but for plain-inverse-sqrt (the
    config's own, whatever the comparison's)."""
    if arm == "plain-inverse-sqrt":
        return "inverse_sqrt"
    return ctx.get("schedule", DEFAULT_SCHEDULE)


def arm_run_name(arm, share, seed, ctx):
    """The run's folder name: plain-inverse-sqrt's is the same under every schedule, so that
    each comparison reuses one run of it."""
    schedule = arm_schedule(arm, ctx)
    return run_name(arm, share, seed, "cosine" if schedule == "inverse_sqrt" else schedule)


def arm_args(arm, share, seed, ctx, random_rate_text=None):
    """The fairseq-train arguments (without DATA) of one run."""
    save = ctx["work"] / arm_run_name(arm, share, seed, ctx) / "checkpoints"
    if arm == "plain-inverse-sqrt":  # the config's schedule and budget form, all epochs kept
        budget = (["--max-epoch", str(ctx["budget_epochs"])] if ctx["budget_epochs"]
                  and share == 1.0 else ["--max-update", str(round(share * ctx["B"]))])
        return build_run_args(ctx["tokens"], "baseline", seed, save, budget, ctx["extra"], [],
                              ctx["langs"], keep_epochs=True)
    max_update = round(share * ctx["B"])
    if arm == "two-stage":  # the scoring forward passes are paid out of the budget
        max_update -= round(2 * FORWARD_SHARE * ctx["pass_updates"])
    budget = ["--max-update", str(max_update)]
    schedule = arm_schedule(arm, ctx)
    tokens = schedule_tokens(ctx["tokens"], schedule, max_update)
    if arm in PLAIN_ARMS:
        # rex is the plugin's: plain fairseq finds it through --user-dir
        user_dir = ["--user-dir", str(USER_DIR)] if schedule == "rex" else []
        return build_run_args(tokens, "baseline", seed, save, budget, user_dir + ctx["extra"],
                              [], ctx["langs"])
    if arm == "random":
        own = ["--assistant-rule", "random", "--assistant-random-rates", random_rate_text]
    else:
        own = ctx["rules"].get(arm, [])
    return build_run_args(tokens, arm, seed, save, budget, ctx["extra"],
                          ctx["assistant_extra"] + own + (SYNC if ctx["sync"] else []),
                          ctx["langs"])


def bleu_signature(ckpt_dir):
    log = ckpt_dir / "bleu-checkpoint_last.log"
    m = log.exists() and re.search(r"sacreBLEU signature: (\S+)", log.read_text())
    return m.group(1) if m else None


def two_stage_tokens(counts, seed, stage1, epoch, updates):
    """Boss tokens of a two-stage run at (*epoch*, *updates*) of its second stage: *stage1*
    (its first stage's tokens, and the scoring passes' share) plus the batches trained on
    the filtered corpus (*counts*) since the first stage's last update; --update-freq 1."""
    import numpy as np
    from fairseq.data import data_utils

    first_epoch, first_updates, before = stage1
    done = (epoch - first_epoch) * len(counts)
    n = min(len(counts), max(0, updates - first_updates - done))
    order = list(range(len(counts)))
    with data_utils.numpy_seed(seed + epoch):
        np.random.shuffle(order)
    partial = counts[order[:n]].sum(axis=0) if n else np.zeros(2)
    total = before + counts.sum(axis=0) * (epoch - first_epoch) + partial
    return int(total[0]), int(total[1])


def run_entry(arm, share, seed, run_dir, ctx, counts, update_freq, stage1=None):
    """The summary.json entry of a finished run (plus its curve and arguments); *counts*:
    fairseq's batches of the data the run trained on; *stage1*: a two-stage run's first
    stage (:func:`two_stage`)."""
    text = (run_dir / "train.log").read_text()
    records = parse_log(text)
    if stage1 is not None:
        curve = build_curve(records, lambda e, u, _: two_stage_tokens(counts, seed, stage1, e, u))
    elif arm in PLAIN_ARMS:
        curve = build_curve(records, lambda e, u, _: baseline_tokens_at(
            counts, update_freq, seed, e, u))
    else:
        curve = build_curve(records, lambda e, u, train: (
            int(train["aa_boss_tok"]) if "aa_boss_tok" in train else None, None))
    if not curve:
        raise BenchmarkError(f"{run_dir}/train.log has no validation line")
    end = curve[-1]
    bleu = None if ctx["skip_bleu"] else run_bleu(ctx["data"], run_dir / "checkpoints",
                                                  checkpoint="checkpoint_last.pt")
    return {"corpus": ctx["corpus"], "seed": seed, "arm": arm,
            # a two-stage run's scoring passes, in updates, count in its share
            "budget_share": round((end["updates"] + (0 if stage1 is None else round(
                2 * FORWARD_SHARE * ctx["pass_updates"]))) / ctx["B"], 4),
            "valid_loss": end["valid_loss"],
            "valid_reducible_loss": round(end["valid_loss"] - ctx["floor_bits"], 4),
            "bleu": bleu, "boss_tokens": end["boss_tokens"], "updates": end["updates"],
            "wall_s": end["wall"], "other_cpu_share": other_cpu_share(run_dir / "cpu.json"),
            "bleu_signature": None if bleu is None else bleu_signature(run_dir / "checkpoints"),
            "schedule": arm_schedule(arm, ctx), "run": str(run_dir)}, curve


def floor_bits(data, tokens, langs):
    """The label-smoothing floor of the validation loss, in bits."""
    from fairseq.data import Dictionary

    from autoassist_fairseq.losses import label_smoothing_floor

    eps = float(get_flag(tokens, "--label-smoothing", default=0.0))
    vocab = len(Dictionary.load(str(Path(data) / f"dict.{langs[1]}.txt")))
    return label_smoothing_floor(eps, vocab) / math.log(2)


def check_sync_available():
    from autoassist_fairseq.tasks.autoassist_translation import AutoAssistTranslationConfig

    if "assistant_sync" not in AutoAssistTranslationConfig.__dataclass_fields__:
        raise BenchmarkError("this checkout's task has no --assistant-sync (deterministic "
                             "mode): update it, or pass --async to run without it")


def two_stage(share, seed, ctx, args, full_batches):
    """Run a two-stage arm's first stage and its filter (each skipped when done before);
    return (the filtered corpus, the second stage's fairseq-train arguments, its first
    stage for :func:`two_stage_tokens`)."""
    import subprocess

    import numpy as np

    from research.bench.filtered_data import dynamics_data

    name = arm_run_name("two-stage", share, seed, ctx)
    run_dir, k = ctx["work"] / name, ctx["two_stage_passes"]
    stage1_ckpt = run_dir / "stage1" / "checkpoints"
    if k * ctx["pass_updates"] >= int(get_flag(args, "--max-update")):
        raise BenchmarkError(f"two-stage@{share}: its {get_flag(args, '--max-update')} updates "
                             f"end within the first stage's {k} passes: give a larger share "
                             "or fewer --two-stage-passes")
    first = drop_flags(args, set(KEEP_EPOCH_FLAGS) | {"--save-dir"})
    first += ["--save-dir", str(stage1_ckpt), "--max-epoch", str(k)]
    run_training(f"{name}/stage1", ctx["data"], first, ctx["work"])
    losses = []
    for p in (1, k):
        out = run_dir / "losses" / f"losses.checkpoint{p}.npz"
        if not out.exists():
            out.parent.mkdir(parents=True, exist_ok=True)
            print(f"[{name}] the losses of every pair at checkpoint {p}", flush=True)
            with open(run_dir / "diagnose.log", "a") as log:
                rc = subprocess.call(
                    [sys.executable, "-c", "from autoassist_fairseq.diagnose import cli_main; "
                     "cli_main()", "--data", str(ctx["data"]), "--checkpoint",
                     str(stage1_ckpt / f"checkpoint{p}.pt"), "--losses-out", str(out)],
                    stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
            if rc:
                raise BenchmarkError(f"two-stage: autoassist-diagnose failed; see "
                                     f"{run_dir / 'diagnose.log'}")
        losses.append(out)
    data = dynamics_data(ctx["data"], run_dir / "filtered-data", *losses)
    counts = full_batches[0]
    before = counts.sum(axis=0) * (k + 2 * FORWARD_SHARE)
    stage1 = (k + 1, k * len(counts), np.round(before))
    return data, args + ["--continue-once", str(stage1_ckpt / f"checkpoint{k}.pt")], stage1


def run_seed(seed, plan, ctx):
    """Train (or reuse) every arm of *plan* for *seed*, merging each into the summary."""
    probe = build_run_args(ctx["tokens"], "baseline", seed, ctx["work"], [], ctx["extra"], [],
                           ctx["langs"])
    batches = {ctx["data"]: baseline_batches(ctx["data"], probe, seed)}
    for arm, share in plan:
        if arm == "plain-inverse-sqrt" and seed != ctx["seeds"][0]:
            continue  # one seed: the comparison with the earlier tables
        rates = None
        if arm == "random":
            source = ctx["work"] / arm_run_name("default", share, seed, ctx) / "train.log"
            if not source.exists() or "done training" not in source.read_text():
                raise BenchmarkError(f"random@{share}: the default run at that share "
                                     f"({source.parent}) has not finished: list it first")
            text = source.read_text()
            rates = random_rates(parse_log(text), text, read_passes(source.parent / PASS_LOG))
        args = arm_args(arm, share, seed, ctx, rates)
        stage1 = None
        if arm == "plain-checked":
            data = checked_data(ctx["data"], ctx["work"] / "filtered-data")
        elif arm == "plain-opusfilter":
            data = opusfilter_data(ctx["data"], ctx["work"] / "opusfilter-data")
        elif arm == "two-stage":
            data, args, stage1 = two_stage(share, seed, ctx, args, batches[ctx["data"]])
        else:
            data = ctx["data"]
        if data not in batches:
            batches[data] = baseline_batches(data, probe, seed)
        run_dir = ctx["work"] / arm_run_name(arm, share, seed, ctx)
        if arm == "plain-inverse-sqrt" and ctx["inverse_sqrt_run"]:
            if not reusable_run(ctx["inverse_sqrt_run"], ctx["data"], args):
                print(f"[{run_dir.name}] {ctx['inverse_sqrt_run']} is still training: "
                      "rerun this command once it has finished", flush=True)
                continue
            run_dir = ctx["inverse_sqrt_run"]
            print(f"[{run_dir.name}] reusing {run_dir}", flush=True)
        else:
            run_training(run_dir.name, data, args, ctx["work"])
        entry, curve = run_entry(arm, share, seed, run_dir, ctx, *batches[data], stage1=stage1)
        report.record_run(ctx["results"], arm_run_name(arm, share, seed, ctx), entry, args,
                          curve)
        print(f"[{run_dir.name}] valid loss {entry['valid_loss']} (reducible "
              f"{entry['valid_reducible_loss']}), BLEU {entry['bleu']}, Boss tokens "
              f"{entry['boss_tokens']}", flush=True)


def parse_cli(argv):
    p = doc_parser(__doc__, 1)
    p.add_argument("--data", required=True, type=Path, help="prepared data directory")
    p.add_argument("--config", required=True, help="configs/**/NAME.args name, or a path")
    p.add_argument("--corpus", required=True,
                   help="the corpus's name in summary.json (multi30k, multi30k-noisy, tatoeba)")
    p.add_argument("--work", required=True, type=Path,
                   help="work directory outside the repository: runs go in WORK/CORPUS/")
    budget = p.add_mutually_exclusive_group(required=True)
    budget.add_argument("--budget-epochs", type=int, help="B in epochs of fairseq's batches")
    budget.add_argument("--budget-updates", type=int, help="B in updates")
    p.add_argument("--seed", type=int, nargs="+", default=[1], help="seeds (default: 1)")
    p.add_argument("--arms", default=DEFAULT_ARMS,
                   help=f"ARM@SHARE list, run in this order (default: {DEFAULT_ARMS})")
    p.add_argument("--schedule", choices=SCHEDULES, default=DEFAULT_SCHEDULE,
                   help="the learning-rate schedule of every arm but plain-inverse-sqrt, "
                        f"decaying to 0 at the arm's own budget (default: {DEFAULT_SCHEDULE})")
    p.add_argument("--rule", action="append", type=parse_arm, default=[], metavar='NAME="ARGS"',
                   help="an Assistant arm with these flags, at shares "
                        f"{', '.join(map(str, RULE_SHARES))} unless --arms lists it")
    p.add_argument("--listed-only", action="store_true",
                   help="only the --arms listed: a --rule that they do not name runs nowhere")
    p.add_argument("--two-stage-passes", type=int, default=4,
                   help="the two-stage arm's first stage in passes over the corpus (default: 4)")
    p.add_argument("--inverse-sqrt-run", type=Path,
                   help="a finished run of the same plain-inverse-sqrt command to reuse")
    p.add_argument("--async", dest="sync", action="store_false",
                   help="Assistant arms without --assistant-sync, the Assistant in its own "
                        "process (not deterministic)")
    p.add_argument("--skip-bleu", action="store_true", help="no test BLEU")
    p.add_argument("--dry-run", action="store_true",
                   help="print B and every run's fairseq-train flags, train nothing")
    p.add_argument("--extra-args", default="", help="more fairseq-train flags, every arm")
    p.add_argument("--assistant-args", default="",
                   help="more fairseq-train flags, every Assistant arm")
    p.add_argument("--results", type=Path, default=REPO / "docs" / "results" / "converged",
                   help="summary.json, runs-CORPUS.json and README.md go here")
    return p.parse_args(argv)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--measure-budget" in argv:
        return report.main(argv)
    a = parse_cli(argv)
    if not a.data.is_dir():
        raise BenchmarkError(f"data directory not found: {a.data}")
    tokens = read_args_file(find_config(a.config))
    extra = shlex.split(a.extra_args)
    rules = dict(a.rule)
    taken = {*PLAIN_ARMS, "default", "random"} & set(rules)
    if taken:
        raise BenchmarkError(f"--rule {sorted(taken)}: the name is an arm's; choose another")
    plan = parse_arms(a.arms, rules, a.listed_only)
    ctx = {"data": a.data.resolve(), "tokens": tokens, "extra": extra, "corpus": a.corpus,
           "work": (a.work / a.corpus).resolve(), "rules": {"default": [], **rules},
           "sync": a.sync, "schedule": a.schedule, "assistant_extra": shlex.split(a.assistant_args),
           "skip_bleu": a.skip_bleu, "seeds": a.seed,
           "budget_epochs": a.budget_epochs, "results": a.results.resolve(),
           "two_stage_passes": a.two_stage_passes,
           "inverse_sqrt_run": a.inverse_sqrt_run and a.inverse_sqrt_run.resolve()}
    ctx["langs"] = data_langs(ctx["data"], tokens, extra)
    if a.sync and any(arm not in PLAIN_ARMS for arm, _ in plan):
        check_sync_available()
    probe = build_run_args(tokens, "baseline", a.seed[0], ctx["work"],
                           ["--max-epoch", str(a.budget_epochs or 1)], extra, [], ctx["langs"])
    counts, update_freq = baseline_batches(ctx["data"], probe, a.seed[0])
    ctx["B"] = (budget_updates(counts, update_freq, probe) if a.budget_epochs
                else a.budget_updates)
    ctx["pass_updates"] = len(counts)
    ctx["floor_bits"] = floor_bits(ctx["data"], tokens + extra, ctx["langs"])
    print(f"B = {ctx['B']} updates ({len(counts)} batches per epoch); label-smoothing floor "
          f"{ctx['floor_bits']:.4f} bits; arms: "
          + ", ".join(f"{arm}@{share}" for arm, share in plan), flush=True)
    if a.dry_run:
        for seed in a.seed:
            for arm, share in plan:
                rates = "<the default run's rates>" if arm == "random" else None
                print(f"{arm_run_name(arm, share, seed, ctx)}: "
                      + shlex.join(map(str, arm_args(arm, share, seed, ctx, rates))))
        return
    ctx["work"].mkdir(parents=True, exist_ok=True)
    for seed in a.seed:
        run_seed(seed, plan, ctx)


def _terminate(signum, frame):
    raise SystemExit(f"fixed_budget.py: stopped by signal {signum}")


if __name__ == "__main__":
    # SIGTERM and a closed terminal unwind run_training, which stops its child
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGHUP, _terminate)
    try:
        main()
    except BenchmarkError as err:
        sys.exit(f"fixed_budget.py: error: {err}")
