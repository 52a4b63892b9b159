"""The ``autoassist_translation`` task's flags, and every check of their values.

:class:`AutoAssistTranslationConfig` is fairseq's ``TranslationConfig`` plus the
``--assistant-*`` flags. This module is the one place where a bad value (or a flag
AutoAssist cannot honour) is refused, naming the flag and the fix, before any data is read:
:func:`check_config` for the task's config, :func:`check_hparams` for the Assistant's
hyperparameters (scripts that build an Assistant without a task use it too),
:func:`check_criterion` for ``--criterion`` and :func:`refuse_batching_flags` for fairseq's
batching flags. The layers below keep only internal asserts.
"""

import inspect
import logging
import os
from dataclasses import dataclass, field, fields
from typing import List, NamedTuple, Optional

from fairseq import utils
from fairseq.dataclass import ChoiceEnum
from fairseq.tasks.translation import TranslationConfig
from omegaconf import II

from ..assistant import AssistantHParams
from ..assistant.rules import MAX_PATIENCE, RULES

logger = logging.getLogger(__name__)

_DEFAULTS = AssistantHParams()
PAIR_CHECK_MODES = ("auto", "require", "off")


@dataclass
class AutoAssistTranslationConfig(TranslationConfig):
    assistant_lr: float = field(
        default=_DEFAULTS.lr, metadata={"help": "learning rate eta of the assistant's sgd step"})
    assistant_weight_decay: float = field(
        default=_DEFAULTS.weight_decay,
        metadata={"help": "l2 decay gamma of the assistant: theta shrinks by (1 - gamma) per update"})
    assistant_threshold_decay: float = field(
        default=_DEFAULTS.threshold_decay,
        metadata={"help": "ema factor of the loss threshold T_k, per loss batch"})
    assistant_accuracy_decay: float = field(
        default=_DEFAULTS.accuracy_decay,
        metadata={"help": "ema factor of the assistant accuracy that lambda_k follows"})
    assistant_lambda_max: float = field(
        default=_DEFAULTS.lambda_max,
        metadata={"help": "ceiling of lambda_k (< 1): every pair keeps an acceptance "
                          "probability of at least 1 - lambda_max; 0 disables skipping"})
    assistant_warmup: int = field(
        default=_DEFAULTS.warmup,
        metadata={"help": "loss batches the assistant learns from before lambda_k may rise"})
    assistant_rule: ChoiceEnum(["paper", "random", "learnable", "noise"]) = field(
        default=_DEFAULTS.rule,
        metadata={"help": "selection rule: paper (skip pairs g predicts easy, algorithm 1), "
                          "random (skip at the fixed per-pass rates of "
                          "--assistant-random-rates; a control), learnable (skip pairs whose "
                          "last loss was below T_k and pairs whose loss stays high without "
                          "declining), noise (skip only the latter)"})
    assistant_random_rates: str = field(
        default=_DEFAULTS.random_rates,
        metadata={"help": "comma-separated acceptance rates in (0, 1] of data passes 1, 2, ... "
                          "for --assistant-rule random; the last repeats (e.g. 1.0,0.8,0.74)"})
    assistant_noise_quantile: float = field(
        default=_DEFAULTS.noise_quantile,
        metadata={"help": "learnable and noise rules: a loss counts as high above the "
                          "ema of this quantile of the loss batches"})
    assistant_noise_min_decline: float = field(
        default=_DEFAULTS.noise_min_decline,
        metadata={"help": "learnable and noise rules: relative loss decline between two "
                          "visits of a pair that counts as still learning"})
    assistant_noise_patience: int = field(
        default=_DEFAULTS.noise_patience,
        metadata={"help": "learnable and noise rules: consecutive high visits without that "
                          "decline after which a pair is skipped as unlearnable"})
    assistant_pair_checks: str = field(default="auto", metadata={"help": (
        "the pair checks of autoassist-features: pairs with a side in the wrong language "
        "(untranslated copies) or two unrelated sides (misaligned) are accepted at the floor "
        "1 - lambda_max, under any rule but random. auto: used when the feature file has them "
        "(else a warning); require: stop if it has none; off: not used")})
    assistant_window: int = field(
        default=4096, metadata={"help": "candidates (random pairs, batched by length inside) scored "
                                       "together"})
    assistant_boss_queue_size: int = field(
        default=4, metadata={"help": "windows of batches the assistant may prepare ahead"})
    assistant_loss_queue_size: int = field(
        default=256, metadata={"help": "loss messages that may wait for the assistant; "
                                       "the oldest is dropped when full"})
    assistant_sync: bool = field(default=False, metadata={"help": (
        "deterministic batches: make each window in the boss's process from the assistant's "
        "state after exactly the losses of the batches up to a fixed lag before it, so that two "
        "runs with the same seed, data and flags train the same batches (the assistant then "
        "shares the boss's process instead of running beside it)")})
    assistant_fallback: ChoiceEnum(["error", "uniform"]) = field(
        default="error", metadata={"help": "when the assistant process fails: stop the run "
                                           "(error) or continue on uniform batches (uniform)"})
    assistant_reweight: bool = field(
        default=False, metadata={"help": "weigh each accepted pair's loss by 1 / P(accept) "
                                         "(importance sampling, as InfoBatch rescales), "
                                         "so that skipping does not bias the Boss's gradient"})
    assistant_features: Optional[str] = field(
        default=None, metadata={"help": "path prefix of the feature file (default: "
                                        "DATA/SPLIT.SRC-TGT.autoassist, see autoassist-features)"})
    assistant_trace_dir: Optional[str] = field(
        default=None, metadata={"help": "write the dataset ids of every batch the boss trains "
                                        "on to DIR/trained.rank<R>.tsv (epoch, update, ids), "
                                        "e.g. to audit what was skipped"})
    assistant_pass_log: Optional[str] = field(default=None, metadata={"help": "append one JSON "
        "line per finished data pass (its acceptance; the random control's rates) to FILE"})
    assistant_anneal: float = field(
        default=0.0, metadata={"help": "share of the run, at its end, in which every pair is "
                                       "accepted (infobatch's annealing; e.g. 0.125); measured "
                                       "in updates with --max-update, else in epochs"})
    # owned by other config groups: when the run ends (annealing) and saves (the batch
    # plans of all workers are gathered before every save)
    max_update: int = II("optimization.max_update")
    max_epoch: int = II("optimization.max_epoch")
    curriculum: int = II("dataset.curriculum")
    update_freq: List[int] = II("optimization.update_freq")
    save_interval_updates: int = II("checkpoint.save_interval_updates")
    # the checkpoint fairseq-train resumes from, checked before fairseq reads it
    save_dir: str = II("checkpoint.save_dir")
    restore_file: str = II("checkpoint.restore_file")


class CheckedConfig(NamedTuple):
    """What :func:`check_config` derives from a valid config."""
    hparams: AssistantHParams
    pair_check_mode: str  # --assistant-pair-checks, one of PAIR_CHECK_MODES


def check_config(cfg) -> CheckedConfig:
    """Raise ValueError, naming the flag and the fix, for any bad ``--assistant-*`` value;
    warn for a flag set where it has no effect."""
    hparams = check_hparams(AssistantHParams(
        **{f.name: getattr(cfg, "assistant_" + f.name) for f in fields(AssistantHParams)}))
    if cfg.assistant_window < 1:
        raise ValueError(f"--assistant-window={cfg.assistant_window} must be >= 1")
    for name in ("assistant_boss_queue_size", "assistant_loss_queue_size"):
        if getattr(cfg, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')}={getattr(cfg, name)} must be >= 1")
    if not 0.0 <= cfg.assistant_anneal < 1.0:
        raise ValueError(f"--assistant-anneal={cfg.assistant_anneal} is out of range: it "
                         "must be in [0, 1) (a share of the run, e.g. 0.125)")
    if cfg.assistant_anneal > 0 and not (cfg.max_update or 0) > 0 and not (cfg.max_epoch or 0) > 0:
        raise ValueError(f"--assistant-anneal={cfg.assistant_anneal} is a share of the run, "
                         "but the run has no end: set --max-update or --max-epoch (a run "
                         "stopped by --stop-time-hours or --stop-min-lr has no known end)")
    if len(set(getattr(cfg, "update_freq", None) or [1])) > 1:
        raise ValueError(f"--update-freq {','.join(map(str, cfg.update_freq))} varies by "
                         "epoch, and AutoAssist plans its batches and save points with one "
                         "number of batches per update: give one value")
    if (getattr(cfg, "curriculum", 0) or 0) > 0:
        raise ValueError(f"--curriculum {cfg.curriculum} asks for the first epochs in "
                         "fairseq's length order, which AutoAssist batches (cut from windows "
                         "of random pairs) cannot follow: drop --curriculum with --task "
                         "autoassist_translation")
    shards = len([p for p in utils.split_paths(str(cfg.data or "")) if p])
    if cfg.assistant_features and shards > 1:
        raise ValueError(f"--assistant-features {cfg.assistant_features} names one feature "
                         f"file, but --data has {shards} data shards, each with its own "
                         "features: drop --assistant-features and build each shard's file at "
                         f"its default place: autoassist-features SHARD --source-lang "
                         f"{cfg.source_lang} --target-lang {cfg.target_lang}")
    trace, log = cfg.assistant_trace_dir, cfg.assistant_pass_log
    if trace and os.path.exists(trace) and not os.path.isdir(trace):
        raise ValueError(f"--assistant-trace-dir {trace} is a file: give a folder (the trace "
                         "is written to DIR/trained.rank<R>.tsv)")
    if log and (os.path.isdir(log) or not os.access(
            log if os.path.exists(log) else os.path.dirname(os.path.abspath(log)), os.W_OK)):
        raise ValueError(f"--assistant-pass-log {log} is a folder, or a file this user cannot "
                         "write or create: give a file in a writable folder (a JSON line is "
                         "appended to it at the end of each data pass)")
    mode = str(cfg.assistant_pair_checks).lower()
    if mode not in PAIR_CHECK_MODES:
        raise ValueError(f"--assistant-pair-checks {cfg.assistant_pair_checks} is not one of "
                         f"{', '.join(PAIR_CHECK_MODES)}: give one of them (auto: the default)")
    _warn_unused(cfg, hparams.rule)
    if mode == "require" and hparams.rule == "random":
        raise ValueError("--assistant-pair-checks require cannot go with --assistant-rule "
                         "random: the control must skip at random; drop one of the two")
    return CheckedConfig(hparams, mode)


def check_hparams(h: AssistantHParams) -> AssistantHParams:
    """Raise ValueError naming the flag and its valid range for any bad value of the
    Assistant's hyperparameters *h*; returns them."""
    rules = {
        "lr": (0 < h.lr < float("inf"), "a finite number > 0"),
        "weight_decay": (0 <= h.weight_decay < 1, "in [0, 1)"),
        "threshold_decay": (0 <= h.threshold_decay < 1, "in [0, 1)"),
        "accuracy_decay": (0 <= h.accuracy_decay < 1, "in [0, 1)"),
        "lambda_max": (0 <= h.lambda_max < 1, "in [0, 1) (1 would let the Assistant "
                       "exclude pairs for good)"),
        "warmup": (h.warmup >= 0, ">= 0"),
        "rule": (h.rule in RULES, "one of " + ", ".join(RULES)),
        "noise_quantile": (0.5 < h.noise_quantile < 1, "in (0.5, 1)"),
        "noise_min_decline": (0 <= h.noise_min_decline < 1, "in [0, 1)"),
        "noise_patience": (2 <= h.noise_patience <= MAX_PATIENCE,
                           f"an integer in [2, {MAX_PATIENCE}] (one visit cannot show "
                           "that a loss does not decline)"),
    }
    for name, (ok, allowed) in rules.items():
        if not ok:
            flag = "--assistant-" + name.replace("_", "-")
            raise ValueError(f"{flag}={getattr(h, name)} is out of range: it must be "
                             f"{allowed}")
    if h.random_rates:
        _check_random_rates(h.random_rates)
    elif h.rule == "random":
        raise ValueError("--assistant-rule random needs --assistant-random-rates, the "
                         "per-pass acceptance rates in (0, 1], e.g. 1.0,0.8,0.74")
    return h


def _check_random_rates(text: str) -> None:
    """``--assistant-random-rates``: comma-separated rates, each in (0, 1]."""
    items = [t.strip() for t in str(text).split(",")]
    problem = "is empty or has an empty item" if not text or not all(items) else None
    if problem is None:
        try:
            bad = [r for r in map(float, items) if not 0.0 < r <= 1.0]  # NaN fails this too
            problem = f"has rates {bad} out of range" if bad else None
        except ValueError:
            problem = "is not a list of numbers"
    if problem:
        raise ValueError(f"--assistant-random-rates={text!r} {problem}: "
                         "--assistant-random-rates must be comma-separated per-pass "
                         "acceptance rates in (0, 1], e.g. 1.0,0.8,0.74 (the last one "
                         "repeats for later passes)")


# flags that act under some settings only: (flag, the settings it needs, whether the config
# has them); a value other than the default without them is most likely a mistake
_NEEDS = (
    ("random_rates", "--assistant-rule random",
     lambda cfg, rule: rule == "random"),
    ("noise_quantile", "--assistant-rule learnable or noise",
     lambda cfg, rule: rule in ("learnable", "noise")),
    ("noise_min_decline", "--assistant-rule learnable or noise",
     lambda cfg, rule: rule in ("learnable", "noise")),
    ("noise_patience", "--assistant-rule learnable or noise",
     lambda cfg, rule: rule in ("learnable", "noise")),
    ("boss_queue_size", "an Assistant process (not --assistant-sync)",
     lambda cfg, rule: not cfg.assistant_sync),
    ("loss_queue_size", "an Assistant process (not --assistant-sync)",
     lambda cfg, rule: not cfg.assistant_sync),
)


def _warn_unused(cfg, rule: str) -> None:
    """Warn, naming what it needs, for a flag set away from its default where it has no
    effect (``--assistant-random-rates`` without the random rule trains the default rule)."""
    defaults = {f.name: f.default for f in fields(AutoAssistTranslationConfig)}
    for name, needs, applies in _NEEDS:
        key = "assistant_" + name
        if getattr(cfg, key) != defaults[key] and not applies(cfg, rule):
            logger.warning(f"--{key.replace('_', '-')} {getattr(cfg, key)} has no effect "
                           f"without {needs}: it is ignored")


# fairseq's batching flags the Assistant's iterator cannot honour, and why; the others are
# honoured (--fix-batches-to-gpus holds by construction: a rank's shard is fixed for the run)
_REFUSED = {
    "skip_remainder_batch": "--skip-remainder-batch drops the last, smaller batch of each "
                            "rank's epoch so that the ranks stay in step; AutoAssist epochs "
                            "are an agreed number of full batches on every rank, so there is "
                            "no such batch, and dropping one would leave its pairs out",
    "grouped_shuffling": "--grouped-shuffling shuffles groups of length-sorted batches so "
                         "that the ranks get similar lengths; AutoAssist batches are cut from "
                         "windows of random pairs on each rank",
    "update_epoch_batch_itr": "--update-epoch-batch-itr rebuilds the train iterator every "
                              "epoch; the AutoAssist iterator holds the Assistant and its "
                              "batch plan for the whole run",
}


def refuse_batching_flags(kwargs: dict) -> None:
    """Raise, naming the flag and why, for a fairseq batching flag that is set but that
    AutoAssist batches cannot honour (silently ignoring it would train something else).
    fairseq passes them to ``get_batch_iterator``, not to the task's config."""
    for name, why in _REFUSED.items():
        if kwargs.get(name):
            raise ValueError(f"{why}: drop it with --task autoassist_translation")


def check_criterion(criterion) -> None:
    """Raise, naming the fix, where *criterion* (``--criterion``) cannot give one loss per
    target token, which the Assistant's per-sentence losses are made of."""
    compute_loss = getattr(criterion, "compute_loss", None)
    if compute_loss is None or "reduce" not in inspect.signature(compute_loss).parameters:
        raise ValueError(
            f"--task autoassist_translation needs token-level losses, but criterion "
            f"{type(criterion).__name__} has no compute_loss(model, net_output, sample, reduce); "
            "use --criterion cross_entropy or --criterion label_smoothed_cross_entropy")
    if getattr(criterion, "rdrop_alpha", 0) > 0:
        # R-Drop doubles the batch and adds its KL term to every token's loss
        raise ValueError(
            f"--task autoassist_translation needs one loss per target token of the batch, but "
            f"--rdrop-alpha {criterion.rdrop_alpha} runs every sentence twice and adds a KL "
            "term to each token; use --rdrop-alpha 0, or --task translation for R-Drop")
