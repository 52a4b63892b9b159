"""Every arm of every seed at equal compute: the baseline first, then each Assistant arm
with --max-update = the baseline's final updates; their curves, BLEU curves and figures,
gathered into results.json (results.md and curves.png: report.py)."""

import json
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from . import BenchmarkError
from .budgets import baseline_batches, baseline_tokens_at, budget_updates, updates_for_tokens, \
    validation_flags
from .flags import build_run_args
from .logs import PASS_LOG, build_curve, epochs_trained, parse_log, random_rates, read_passes
from .metrics import arm_metrics, mean_arms
from .report import BLEU_KEPT, NOTES, plot_curves, write_markdown
from .runs import bleu_curve, diagnose_run, machine_record, other_cpu_share, run_training


@dataclass(frozen=True)
class Plan:
    """What one benchmark trains and measures (checked by the command line)."""

    data: Path                     # the prepared data directory (absolute)
    out: Path                      # one folder per run, results.* and curves.png
    config: Path                   # the .args config
    tokens: list                   # the config's fairseq-train tokens
    extra: list                    # --extra-args: flags for every arm
    langs: tuple                   # (source, target) of every arm
    budget: list                   # the baseline's budget flags ([]: the config's)
    budget_tokens: Optional[float]  # --budget-tokens, turned into --max-update per seed
    arms: dict                     # Assistant arm name -> its flags beyond the config
    aa_run: str                    # the AutoAssist arm ("autoassist[-VARIANT]")
    random_run: Optional[str]      # the random control, paced by aa_run (None: left out)
    validations: int               # validations per run besides those at epoch ends
    skip_bleu: bool                # no test BLEU
    bleu_kept: bool                # BLEU of the checkpoints the config kept only
    noise_labels: Optional[Path]   # labels of the raw training pairs (noise report)
    variant: str = ""              # name of --autoassist-args: results-VARIANT.*
    autoassist_args: tuple = ()    # --autoassist-args, as given

    @property
    def keep_checkpoints(self):
        """Every saved checkpoint stays for BLEU (the config's keep flags are dropped)."""
        return not (self.skip_bleu or self.bleu_kept)


def benchmark_seed(seed, plan):
    """Train (or reuse) every arm of one seed: their curves, BLEU curves, its row of
    per_seed and the run arguments."""
    data, out, tokens, langs = plan.data, plan.out, plan.tokens, plan.langs
    keep = plan.keep_checkpoints
    probe = build_run_args(tokens, "baseline", seed, out, plan.budget, plan.extra, [], langs)
    counts, update_freq = baseline_batches(data, probe, seed)
    budget = plan.budget
    if plan.budget_tokens:
        budget = ["--max-update", str(updates_for_tokens(counts, update_freq,
                                                         plan.budget_tokens))]
    probe = build_run_args(tokens, "baseline", seed, out, budget, plan.extra, [], langs)
    extra = plan.extra + validation_flags(probe, budget_updates(counts, update_freq, probe),
                                          plan.validations, checkpoints=keep)
    base_name = f"baseline-s{seed}"
    args = {"baseline": build_run_args(tokens, "baseline", seed, out / base_name / "checkpoints",
                                       budget, extra, [], langs, keep)}
    texts = {"baseline": run_training(base_name, data, args["baseline"], out)}
    logs = {"baseline": parse_log(texts["baseline"])}
    updates = int(max(r["num_updates"] for r in logs["baseline"] if r["tag"] == "train"))
    arm_budget = ["--max-update", str(updates)]
    for arm, arm_args in plan.arms.items():
        if arm == plan.random_run:  # the control skips at AutoAssist's measured rates
            passes = read_passes(out / f"{plan.aa_run}-s{seed}" / PASS_LOG)
            arm_args = arm_args + ["--assistant-random-rates", random_rates(
                logs[plan.aa_run], texts[plan.aa_run], passes)]
        name = f"{arm}-s{seed}"
        args[arm] = build_run_args(tokens, arm, seed, out / name / "checkpoints", arm_budget,
                                   extra, arm_args, langs, keep)
        texts[arm] = run_training(name, data, args[arm], out)
        logs[arm] = parse_log(texts[arm])

    curves = {"baseline": build_curve(logs["baseline"], lambda e, u, _: baseline_tokens_at(
        counts, update_freq, seed, e, u))}
    for arm in plan.arms:
        curves[arm] = build_curve(logs[arm], lambda e, u, train: (
            int(train["aa_boss_tok"]) if "aa_boss_tok" in train else None, None))
    if not all(curves.values()):
        raise BenchmarkError(f"no validation lines in the train.log files of seed {seed} in {out}")
    bleus = {arm: [] if plan.skip_bleu else bleu_curve(
        data, out / f"{arm}-s{seed}" / "checkpoints", curves[arm]) for arm in curves}
    equal_tokens = min(c[-1]["boss_tokens"] for c in curves.values()
                       if c[-1]["boss_tokens"] is not None)
    equal_wall = min(c[-1]["wall"] for c in curves.values() if c[-1]["wall"] is not None)
    arms = {arm: dict(arm_metrics(curves[arm], bleus[arm], curves["baseline"],
                                  bleus["baseline"], equal_tokens, equal_wall,
                                  bleu_from_start=keep),
                      epochs_trained=epochs_trained(logs[arm]),
                      other_cpu_share=other_cpu_share(out / f"{arm}-s{seed}" / "cpu.json"))
            for arm in curves}
    if plan.noise_labels:
        add_noise_report(arms, seed, plan)
    row = {"seed": seed, "target_loss": arms["baseline"]["target_loss"],
           "target_bleu": arms["baseline"]["target_bleu"],
           "baseline_tokens_per_epoch": int(counts[:, 0].sum()),
           "baseline_padded_tokens_per_epoch": int(counts[:, 1].sum()),
           "baseline_batches_per_epoch": len(counts), "budget_updates": updates, "arms": arms}
    named = {f"{arm}-s{seed}": c for arm, c in curves.items()}
    return named, {f"{arm}-s{seed}": b for arm, b in bleus.items()}, row, args


def add_noise_report(arms, seed, plan):
    """The noise shares of every Assistant arm's last checkpoint (research.noise_report);
    the baseline's uniform batches train every pair: the corpus share."""
    corpus = None
    for arm, m in arms.items():
        if arm == "baseline":
            continue
        d = diagnose_run(plan.data, plan.out / f"{arm}-s{seed}" / "checkpoints",
                         plan.noise_labels)
        m["noise"] = d and d["noise"]["assistant"]
        m["noise_by_kind"] = d and d["noise"].get("by_kind")
        m["verdict"] = d and d["verdict"]  # from the corpus's noise share (autoassist-diagnose)
        m["skipped_share_reducible_loss"] = d and d.get("skipped_share_reducible_loss")
        m["skip_density"] = d and d.get("skip_density_assistant")
        corpus = corpus or (d and d["noise"]["assistant"]["corpus"])
    arms["baseline"]["noise"] = {"skipped": None, "trained": corpus, "corpus": corpus}


def run_plan(plan, seeds, command, budget_note=""):
    """Benchmark every seed; write results(-VARIANT).json/.md and curves(-VARIANT).png."""
    curves, bleu_curves, per_seed, run_args = {}, {}, [], {}
    for seed in seeds:
        seed_curves, seed_bleus, row, args = benchmark_seed(seed, plan)
        curves.update(seed_curves)
        bleu_curves.update(seed_bleus)
        per_seed.append(row)
        run_args = run_args or args
    budget_text = (f"baseline: {shlex.join(plan.budget) if plan.budget else 'the config'}"
                   + budget_note + "; other arms: --max-update = the baseline's updates ("
                   + ", ".join(f"seed {s['seed']}: {s['budget_updates']}" for s in per_seed)
                   + ")")
    results = dict(
        per_seed=per_seed, curves=curves, command=command,
        date=time.strftime("%Y-%m-%d %H:%M:%S %z"), machine=machine_record(),
        config=str(plan.config), data=str(plan.data), notes=NOTES, variant=plan.variant,
        autoassist_args=list(plan.autoassist_args),
        wall_source="fairseq 'wall' of the train line of the validation's epoch (whole "
                    "seconds since training start, validations and checkpoint saves included)",
        arms=mean_arms(per_seed), bleu_curves=bleu_curves, budget=budget_text,
        bleu_checkpoints=None if plan.skip_bleu else BLEU_KEPT if plan.bleu_kept else "all",
        languages=list(plan.langs), noise_labels=str(plan.noise_labels or "") or None,
        arm_args={"baseline": {"args": ["--task", "translation"]}} | {
            arm: {"args": arm_args} for arm, arm_args in plan.arms.items()},
        run_args=run_args)
    plan.out.mkdir(parents=True, exist_ok=True)
    suffix = f"-{plan.variant}" if plan.variant else ""
    paths = [plan.out / f"{stem}{suffix}.{ext}"
             for stem, ext in (("results", "json"), ("results", "md"), ("curves", "png"))]
    paths[0].write_text(json.dumps(results, indent=2) + "\n")
    write_markdown(results, paths[1])
    plot_curves(curves, bleu_curves, per_seed, paths[2], ["baseline", *plan.arms])
    print(paths[1].read_text())
    print("written: " + ", ".join(map(str, paths)))
    return results
