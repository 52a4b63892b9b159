"""Baseline, AutoAssist and a random-skip control at equal compute, on the same data,
model, seed and LR schedule.

    python -m research.bench --data DIR --config NAME --out DIR
        [--max-epoch N | --max-update N | --budget-tokens N] [--seed S ...]
        [--extra-args "..."] [--autoassist-args "..."] [--arm NAME="ARGS" ...]
        [--variant NAME] [--no-random] [--skip-bleu | --bleu-kept] [--noise-labels FILE]

Arms, for each seed, one after the other on this machine:

* ``baseline-s<seed>``: ``--task translation``, fairseq's uniform batches;
* ``autoassist-s<seed>``: ``--task autoassist_translation`` (its defaults: the ``paper``
  rule, with the pair checks when the feature file has them) plus --autoassist-args;
* ``random-s<seed>``: the control, ``--assistant-rule random --assistant-random-rates
  r1,r2,...`` with r_e = the AutoAssist arm's measured token acceptance of its data pass e
  (its "AutoAssist data pass" log lines; the last repeats), so it skips as many tokens
  per pass as AutoAssist but picks them at random; it runs after the AutoAssist arm;
* ``NAME-s<seed>`` for every ``--arm NAME="ARGS"``: ``--task autoassist_translation``
  plus ARGS (e.g. ``--arm learnable="--assistant-rule learnable"``).

Equal compute. The budget is counted in updates, so that update-counting LR schedules
(inverse_sqrt, the configs' default) see the same schedule in every arm: the baseline
trains first, with the config's --max-epoch (or --max-epoch / --max-update here, or
``--budget-tokens N``, turned into updates with the baseline's tokens per update from
fairseq's own batching of the train set); every other arm then gets ``--max-update U``,
U = the baseline's final update count, and no --max-epoch. Batches are filled to
--max-tokens in every arm, so tokens per update are about equal and a skipping arm gets
more (shorter) epochs; the actual Boss tokens are measured and reported.

The language pair is read from DATA (``train.SRC-TGT.*`` and ``dict.*.txt``) and passed to
every arm, overriding the config's; a config naming other languages is an error.
Every arm logs to OUT/<run>/train.log and saves to OUT/<run>/checkpoints; a finished run
(log says "done training", checkpoint present, same command) is reused, an interrupted one
resumes from its checkpoint_last.pt, so a comparison can span several sessions. Epoch
checkpoints, and the checkpoints saved at the validations inside epochs, are kept (the
config's --keep-last-epochs, --keep-interval-updates and --no-epoch-checkpoints are dropped
unless --skip-bleu) and each is scored once (OUT/<run>/checkpoints/bleu-checkpoint*.log).
--bleu-kept trains as --skip-bleu does (so runs made with --skip-bleu are reused, not
retrained) and scores the checkpoints the config kept: BLEU at equal tokens, at equal wall
and last, where those fall within the kept epochs; the tokens and wall to the target BLEU
are then not reported (the curve does not start at the run's start).

Measured at each validation: the validation loss (base 2), fairseq's ``wall`` (seconds since
training started, validations and checkpoint saves included; a resumed run continues the
wall of the checkpoint it resumed from), and the Boss tokens trained so far (non-padding
source + target tokens, EOS included): ``aa_boss_tok`` of the arm's log, or for the
baseline recomputed from the binarised train set with fairseq's batching. Test BLEU (beam
4, detokenised sacreBLEU, scripts/evaluate.sh) per epoch checkpoint and, with --validations,
per checkpoint saved at each validation inside an epoch. For each arm: the
validation loss and BLEU at equal Boss tokens (the smallest final token count of the arms)
and at equal wall time (the smallest final wall), linear between measurements; the tokens
and wall time to reach the baseline's best validation loss and the baseline's final BLEU
minus 0.2 (the crossing, linear between the two measurements around it). With noise labels
(``--noise-labels``, default DATA/train.noise-labels when present; see
research/add_noise.py), every Assistant arm's last checkpoint is diagnosed
(``python -m research.noise_report``) for the noise share of the tokens it would skip and
train. Writes results.json, results.md and curves.png (all arms in one plot per measure).
"""

import argparse
import re
import shlex
import signal
import sys
from pathlib import Path

from . import BenchmarkError
from .equal_compute import Plan, run_plan
from .flags import data_langs, find_config, get_flag, read_args_file


def parse_arm(text):
    """'NAME=ARGS' of --arm -> (NAME, [args])."""
    name, sep, args = text.partition("=")
    if not sep or not re.fullmatch(r"[A-Za-z0-9_.]+", name):
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected NAME=\"fairseq args\" with NAME of letters, digits, '_' or '.'"
            " (e.g. learnable=\"--assistant-rule learnable\")")
    return name, shlex.split(args)


EPILOG = """example (Multi30k, two seeds, the control and two more arms):
  python -m research.bench --data work/multi30k --config multi30k/transformer_small \\
      --out work/bench-m30k --seed 1 2 --max-epoch 12 \\
      --arm learnable="--assistant-rule learnable" \\
      --arm anneal="--assistant-anneal 0.125"
Rerun the same command to continue after an interruption: finished runs are reused."""


def parse_cli(argv):
    """The command line of research.bench."""
    p = argparse.ArgumentParser(prog="python -m research.bench",
                                description=__doc__.split("\n\n")[0], epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True, type=Path,
                   help="a data directory written by scripts/prepare-corpus.sh (fairseq data, "
                        "features, raw references); its language pair is used")
    p.add_argument("--config", required=True,
                   help="configs/**/NAME.args name (e.g. multi30k/transformer_small), or a path")
    p.add_argument("--out", required=True, type=Path,
                   help="output directory: one folder per run, results.json/.md, curves.png")
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--max-epoch", type=int,
                        help="the baseline's epochs (default: the config's --max-epoch)")
    budget.add_argument("--max-update", type=int, help="the baseline's updates")
    budget.add_argument("--budget-tokens", type=float,
                        help="the baseline's Boss tokens (non-padding src+tgt), turned into "
                             "updates with its tokens per update (default: what the config's "
                             "--max-epoch gives)")
    p.add_argument("--seed", type=int, nargs="+", help="seeds (default: the config's, or 1)")
    p.add_argument("--extra-args", default="", help="more fairseq-train flags, every arm")
    p.add_argument("--validations", type=int, default=10,
                   help="validations per run, evenly over the baseline's updates "
                        "(--validate-interval-updates, a multiple of --log-interval), besides "
                        "those at epoch ends, each with a checkpoint scored for BLEU "
                        "(--save-interval-updates; not with --skip-bleu); 0: at epoch ends "
                        "only, as before this option (default: 10)")
    p.add_argument("--autoassist-args", default="",
                   help="more flags for the autoassist arm only")
    p.add_argument("--arm", action="append", type=parse_arm, default=[], metavar='NAME="ARGS"',
                   help="one more --task autoassist_translation arm with these flags "
                        "(repeatable); runs NAME-s<seed>")
    p.add_argument("--variant", default="", help="name of these --autoassist-args: runs "
                   "autoassist-NAME-s<seed> and random-NAME-s<seed>, writes results-NAME.*, "
                   "shares the baseline runs")
    p.add_argument("--async", dest="async_arms", action="store_true",
                   help="run the AutoAssist arms with the Assistant in its own process, as "
                        "plain use does (default: --assistant-sync, so that a rerun trains the "
                        "same batches and two arms differ by their rules, not by timing)")
    p.add_argument("--no-random", action="store_true",
                   help="leave out the random-skip control arm")
    p.add_argument("--skip-bleu", action="store_true",
                   help="no test BLEU (evaluate.sh); epoch checkpoints follow the config")
    p.add_argument("--bleu-kept", action="store_true",
                   help="train as --skip-bleu does (runs made with it are reused), then score "
                        "test BLEU on the checkpoints the config kept (its last epochs): BLEU "
                        "at equal tokens and last, no tokens to the target BLEU")
    p.add_argument("--noise-labels", type=Path, default=None,
                   help="labels of the raw training pairs (research/add_noise.py), for the "
                        "noise "
                        "report (default: DATA/train.noise-labels when present; needs "
                        "DATA/train.kept-lines)")
    return p.parse_args(argv)



def plan_from_args(a):
    """The Plan of a parsed command line, every check done before training starts."""
    if not a.data.is_dir():
        raise BenchmarkError(f"data directory not found: {a.data}")
    data, out = a.data.resolve(), a.out.resolve()
    config = find_config(a.config).resolve()
    tokens = read_args_file(config)
    extra, aa_extra = shlex.split(a.extra_args), shlex.split(a.autoassist_args)
    budget = (["--max-epoch", str(a.max_epoch)] if a.max_epoch else
              ["--max-update", str(a.max_update)] if a.max_update else [])
    if (not budget and not a.budget_tokens
            and get_flag(tokens + extra, "--max-epoch", "--max-update") is None):
        raise BenchmarkError("no budget: give --max-epoch, --max-update or --budget-tokens "
                             "(the config has none)")
    if a.budget_tokens is not None and a.budget_tokens <= 0:
        raise BenchmarkError(f"--budget-tokens {a.budget_tokens}: must be > 0")
    if a.skip_bleu and a.bleu_kept:
        raise BenchmarkError("--skip-bleu and --bleu-kept: choose one (--bleu-kept scores the "
                             "checkpoints a --skip-bleu run kept)")
    if a.validations < 0:
        raise BenchmarkError(f"--validations {a.validations}: must be >= 0 (0: at epoch ends "
                             "only)")
    langs = data_langs(data, tokens, extra)  # fail early on an unknown language pair
    if a.variant and not re.fullmatch(r"[A-Za-z0-9_.]+", a.variant):
        raise BenchmarkError(f"--variant {a.variant!r}: use letters, digits, '_' or '.' only")
    suffix = f"-{a.variant}" if a.variant else ""
    aa_run, random_run = "autoassist" + suffix, "random" + suffix
    arms = {aa_run: aa_extra}
    if not a.no_random:
        arms[random_run] = ["--assistant-rule", "random"]
    for name, arm_args in a.arm:
        if name in arms or name == "baseline" or name.startswith(("autoassist", "random")):
            raise BenchmarkError(f"--arm {name}: the name is taken (baseline, autoassist*, "
                                 "random*) or given twice: choose another")
        arms[name] = arm_args
    if not a.async_arms:  # runs that repeat exactly: margins are not timing noise
        arms = {name: args + ["--assistant-sync"] * ("--assistant-sync" not in args)
                for name, args in arms.items()}
    labels = a.noise_labels or (data / "train.noise-labels")
    if a.noise_labels and not labels.exists():
        raise BenchmarkError(f"--noise-labels {labels} not found")
    if labels.exists() and not (data / "train.kept-lines").exists():
        raise BenchmarkError(f"{data}/train.kept-lines not found: the noise labels follow the "
                             "raw lines; rerun scripts/prepare-corpus.sh to write it")
    return Plan(data=data, out=out, config=config, tokens=tokens, extra=extra, langs=langs,
                budget=budget, budget_tokens=a.budget_tokens, arms=arms, aa_run=aa_run,
                random_run=None if a.no_random else random_run, validations=a.validations,
                skip_bleu=a.skip_bleu, bleu_kept=a.bleu_kept,
                noise_labels=labels if labels.exists() else None, variant=a.variant,
                autoassist_args=tuple(aa_extra))


def main(argv=None):
    """Parse the command line, benchmark every seed, write results.json/.md and curves.png."""
    a = parse_cli(argv)
    plan = plan_from_args(a)
    seeds = a.seed or [int(get_flag(plan.tokens + plan.extra, "--seed", default=1))]
    note = (f", --budget-tokens {a.budget_tokens:g} as --max-update" if a.budget_tokens else "")
    command = ["python", "-m", "research.bench"] + (sys.argv[1:] if argv is None else list(argv))
    return run_plan(plan, seeds, command, note)


def _terminate(signum, frame):
    raise SystemExit(f"research.bench: stopped by signal {signum}")


def entry(argv=None):
    """``python -m research.bench``: main, with SIGTERM and BenchmarkError turned into a
    clean exit (SIGTERM and SIGHUP unwind run_training, which stops its child)."""
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGHUP, _terminate)  # a closed terminal
    try:
        main(argv)
    except BenchmarkError as err:
        sys.exit(f"research.bench: error: {err}")
