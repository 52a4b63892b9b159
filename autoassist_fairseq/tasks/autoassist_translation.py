"""Step 4 of the data flow: the ``autoassist_translation`` task, where the Boss trains.

It is fairseq's ``translation`` task with one change to training: the train subset's
batches come from this worker's Assistant (``get_batch_iterator``), and every training
step reports its per-sentence losses back (``train_step``). Validation, ``fairseq-generate``
and ``fairseq-interactive`` are those of ``translation``.
"""

import functools
import logging
import math
import os
from dataclasses import dataclass, field
from typing import List, Optional

import numpy as np
from fairseq import metrics, utils
from fairseq.data import BaseWrapperDataset, data_utils
from fairseq.dataclass import ChoiceEnum
from fairseq.tasks import register_task
from fairseq.tasks.translation import TranslationConfig, TranslationTask
from omegaconf import II

from ..assistant import Assistant, AssistantHParams
from ..transport.process import AssistantProcess
from ..data.batch_generator import BatchGenerator
from ..data.batch_iterator import AutoAssistEpochBatchIterator
from ..transport.local_source import LocalSource, pipeline_lag
from ..features.build import dataset_prefix
from ..features.store import (FeatureStore, build_command, dataset_fingerprint, feature_prefix,
                              token_files, token_fingerprint)
from ..losses import capture_token_losses, check_criterion, sentence_losses
from .language_pair import check_language_pair

logger = logging.getLogger(__name__)

_DEFAULTS = AssistantHParams()


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
    # pair checks: on by default whenever the feature file has them; the two flags force
    # them on (an error without them) or off
    assistant_pair_checks: bool = field(
        default=False,
        metadata={"help": "require the pair checks of autoassist-features (stop if the feature "
                          "file has none); by default they are used whenever it has them: the "
                          "pairs with a side in the wrong language (untranslated copies) or "
                          "two unrelated sides (misaligned) are accepted at the floor "
                          "1 - lambda_max, under any rule but random"})
    assistant_no_pair_checks: bool = field(
        default=False, metadata={"help": "do not use the pair checks: flagged pairs are "
                                         "accepted as any other (the random rule never uses them)"})
    assistant_window: int = field(
        default=4096, metadata={"help": "candidates (random pairs, batched by length inside) scored "
                                       "together"})
    assistant_boss_queue_size: int = field(
        default=4, metadata={"help": "windows of batches the assistant may prepare ahead"})
    assistant_loss_queue_size: int = field(
        default=256, metadata={"help": "loss messages that may wait for the assistant; "
                                       "the oldest is dropped when full"})
    assistant_sync: bool = field(
        default=False, metadata={"help": "deterministic batches: make each window in the boss's "
                                         "process from the assistant's state after exactly the "
                                         "losses of the batches up to a fixed lag before it, so "
                                         "that two runs with the same seed, data and flags train "
                                         "the same batches (the assistant then shares the boss's "
                                         "process instead of running beside it)"})
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
    assistant_anneal: float = field(
        default=0.0, metadata={"help": "share of the run, at its end, in which every pair is "
                                       "accepted (infobatch's annealing; e.g. 0.125); measured "
                                       "in updates with --max-update, else in epochs"})
    # owned by other config groups: when the run ends (annealing) and saves (the batch
    # plans of all workers are gathered before every save)
    max_update: int = II("optimization.max_update")
    max_epoch: int = II("optimization.max_epoch")
    update_freq: List[int] = II("optimization.update_freq")
    save_interval_updates: int = II("checkpoint.save_interval_updates")


@register_task("autoassist_translation", dataclass=AutoAssistTranslationConfig)
class AutoAssistTranslationTask(TranslationTask):
    """Translation with AutoAssist batches (`Zhang et al., 2019
    <https://arxiv.org/abs/1905.11371>`_): a CPU Assistant learns which pairs the Boss still
    finds hard and leaves easy ones out of its batches.
    """

    cfg: AutoAssistTranslationConfig

    @classmethod
    def setup_task(cls, cfg, **kwargs):
        # a pair the data does not hold: say which pairs it does, not "dict.xx.txt missing"
        check_language_pair(utils.split_paths(cfg.data)[0], cfg.source_lang, cfg.target_lang)
        return super().setup_task(cfg, **kwargs)

    def __init__(self, cfg: AutoAssistTranslationConfig, src_dict, tgt_dict):
        super().__init__(cfg, src_dict, tgt_dict)
        self.hparams = AssistantHParams.from_config(cfg)  # bad values fail before any data
        if cfg.assistant_pair_checks and cfg.assistant_no_pair_checks:
            raise ValueError("--assistant-pair-checks and --assistant-no-pair-checks contradict "
                             "each other: drop one")
        if cfg.assistant_window < 1:
            raise ValueError(f"--assistant-window={cfg.assistant_window} must be >= 1")
        for name in ("assistant_boss_queue_size", "assistant_loss_queue_size"):
            if getattr(cfg, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')}={getattr(cfg, name)} must be >= 1")
        if not 0.0 <= cfg.assistant_anneal < 1.0:
            raise ValueError(f"--assistant-anneal={cfg.assistant_anneal} is out of range: it "
                             "must be in [0, 1) (a share of the run, e.g. 0.125)")
        self.features: Optional[FeatureStore] = None
        self.train_iterator: Optional[AutoAssistEpochBatchIterator] = None
        self.totals = {"boss_tokens": 0.0, "boss_padded_tokens": 0.0,
                       "considered_tokens": 0.0, "accepted_tokens": 0.0}
        self._last_update = None
        self._trace_file = None

    # -- features ---------------------------------------------------------------------
    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        super().load_dataset(split, epoch=epoch, combine=combine, **kwargs)
        if split == self.cfg.train_subset:
            self.features = self._open_features(split, epoch)

    def _open_features(self, split, epoch) -> FeatureStore:
        paths = utils.split_paths(self.cfg.data)
        data_path = paths[(epoch - 1) % len(paths)]
        src, tgt = self.cfg.source_lang, self.cfg.target_lang
        dataset = self.datasets[split]
        prefix = self.cfg.assistant_features or feature_prefix(data_path, split, src, tgt)
        # the sizes as binarised: --truncate-source, --prepend-bos and --append-source-id
        # change the wrapped dataset's sizes, not the pairs the features describe
        fingerprint = dataset_fingerprint(
            stored_sizes(dataset.src), stored_sizes(dataset.tgt),
            [f"{data_path}/dict.{src}.txt", f"{data_path}/dict.{tgt}.txt"])
        tokens = token_fingerprint(token_files(
            [dataset_prefix(data_path, split, src, tgt, lang) for lang in (src, tgt)]))
        store = FeatureStore.open(prefix, fingerprint=fingerprint, num_rows=len(dataset),
                                  rebuild_hint=build_command(data_path, split, src, tgt, prefix),
                                  tokens=tokens)
        logger.info(f"AutoAssist features: {prefix} ({store.num_rows} pairs, dim {store.dim})")
        self.hparams.pair_checks = self._use_pair_checks(store)
        return store

    def _use_pair_checks(self, store: FeatureStore) -> bool:
        """Whether the Assistant skips the pairs the pair checks flag. A file without usable
        checks stops the run under --assistant-pair-checks, before training; by default
        it only turns them off, with a warning that says how to get them."""
        cfg = self.cfg
        if cfg.assistant_no_pair_checks or self.hparams.rule == "random":
            return False
        try:
            suspect = int(np.count_nonzero(store.suspect_pairs()))
        except (FileNotFoundError, ValueError) as err:
            if cfg.assistant_pair_checks:
                raise
            logger.warning(f"AutoAssist pair checks off: {err} (--assistant-no-pair-checks "
                           "turns them off without this warning)")
            return False
        logger.info(f"AutoAssist pair checks: {suspect} pairs ({suspect / max(store.num_rows, 1):.2%}) "
                    "with a side in the wrong language or unrelated sides, accepted at the "
                    "floor (--assistant-no-pair-checks: off)")
        return True

    # -- batches ----------------------------------------------------------------------
    def get_batch_iterator(self, dataset, max_tokens=None, max_sentences=None,
                           max_positions=None, ignore_invalid_inputs=False,
                           required_batch_size_multiple=1, seed=1, num_shards=1, shard_id=0,
                           num_workers=0, epoch=1, data_buffer_size=0, **kwargs):
        """The Assistant's iterator for the train subset; fairseq's for everything else."""
        if dataset is not self.datasets.get(self.cfg.train_subset) or self.features is None:
            return super().get_batch_iterator(
                dataset, max_tokens=max_tokens, max_sentences=max_sentences,
                max_positions=max_positions, ignore_invalid_inputs=ignore_invalid_inputs,
                required_batch_size_multiple=required_batch_size_multiple, seed=seed,
                num_shards=num_shards, shard_id=shard_id, num_workers=num_workers,
                epoch=epoch, data_buffer_size=data_buffer_size, **kwargs)
        _refuse_batching_flags(kwargs)
        if self.train_iterator is not None and self.train_iterator.dataset is dataset:
            return self.train_iterator  # one iterator, one Assistant, for the whole run
        carry = None
        if self.train_iterator is not None:  # the next shard of --data a:b
            carry = self.train_iterator.export_carry()
            if carry["assistant"] is not None and not self._fits_features(carry["assistant"]):
                carry["assistant"] = None
            self.train_iterator.shutdown()
        dataset.set_epoch(epoch)
        with data_utils.numpy_seed(seed):
            indices = dataset.ordered_indices()
        if max_positions is not None:
            indices = self.filter_indices_by_size(indices, dataset, max_positions,
                                                  ignore_invalid_inputs)
        make_generator = functools.partial(
            BatchGenerator, indices, dataset.src_sizes, dataset.tgt_sizes, max_tokens=max_tokens,
            max_sentences=max_sentences, required_batch_size_multiple=required_batch_size_multiple,
            window_size=self.cfg.assistant_window, seed=seed, num_shards=num_shards,
            shard_id=shard_id)
        generator = make_generator()
        make_assistant = functools.partial(Assistant, self.features, self.hparams)
        if self.cfg.assistant_sync:
            lag = pipeline_lag(num_workers, data_buffer_size, max(self.cfg.update_freq or [1]))
            start_source = functools.partial(LocalSource, generator, make_assistant, lag)
            logger.info(f"AutoAssist --assistant-sync: windows are made in this process from "
                        f"the losses of the batches up to {lag} before each window")
        else:
            start_source = functools.partial(
                AssistantProcess, make_assistant, make_generator,
                boss_queue_size=self.cfg.assistant_boss_queue_size,
                loss_queue_size=self.cfg.assistant_loss_queue_size, rank=shard_id)
        self.train_iterator = AutoAssistEpochBatchIterator(
            dataset, dataset.collater, generator, start_source, epoch=epoch,
            fallback=self.cfg.assistant_fallback, num_shards=num_shards, shard_id=shard_id,
            all_gather=_all_gather if num_shards > 1 else None,
            reweight=self.cfg.assistant_reweight, num_workers=num_workers,
            buffer_size=data_buffer_size, anneal_epoch=self._anneal_epoch(), carry=carry)
        return self.train_iterator

    def _fits_features(self, assistant_state: dict) -> bool:
        """The Assistant of the previous data shard carries over when the features have the
        same columns (the same dictionaries); its per-pair memory never does."""
        dim = len(assistant_state["model"]["theta"])
        if dim != self.features.dim:
            logger.warning(f"the features of this data shard have dimension {self.features.dim}, "
                           f"the previous shard's {dim}: starting a new Assistant")
            return False
        for key in list(assistant_state):
            if key not in ("model", "schedule"):
                assistant_state.pop(key)
        return True

    def _anneal_epoch(self) -> Optional[int]:
        """First epoch of annealing, when the run is measured in epochs."""
        share, max_epoch = self.cfg.assistant_anneal, self.cfg.max_epoch or 0
        if share <= 0 or (self.cfg.max_update or 0) > 0 or max_epoch <= 0:
            return None
        return math.floor((1.0 - share) * max_epoch) + 1

    # -- the Boss's step ------------------------------------------------------------------
    def build_criterion(self, cfg):
        criterion = super().build_criterion(cfg)
        check_criterion(criterion)
        return criterion

    def begin_valid_epoch(self, epoch, model):
        """Validation precedes every checkpoint fairseq writes mid-epoch: gather every
        rank's batch plan now (all ranks get here at the same update)."""
        super().begin_valid_epoch(epoch, model)
        if self.train_iterator is not None:
            self.train_iterator.sync_checkpoint_state()

    def train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False):
        itr = self.train_iterator
        meta = sample.get("autoassist") if sample else None
        if itr is None or ignore_grad or meta is None:  # dummy batches teach nothing
            loss, sample_size, logging_output = super().train_step(
                sample, model, criterion, optimizer, update_num, ignore_grad)
            stats = {}
        else:
            itr.client.check()
            if update_num != self._last_update:  # the first micro-batch of an update
                self._last_update = update_num
                self._before_update(itr, update_num)
            with capture_token_losses(criterion, sample.get("autoassist_weight")) as captured:
                loss, sample_size, logging_output = super().train_step(
                    sample, model, criterion, optimizer, update_num, ignore_grad)
            # handed over one step later, so that the copy never waits for the device
            retry = itr.hold_losses(meta, sentence_losses(captured.token_losses, sample,
                                                          self.tgt_dict.pad()))
            stats = itr.pop_log_stats()
            if not retry and self.cfg.assistant_trace_dir:
                self._trace(itr, update_num, meta["ids"])
            if not retry:  # fairseq's --amp retry trains the same batch again
                stats["boss_tokens"] = meta["tokens"]
                src_tokens, target = sample["net_input"]["src_tokens"], sample["target"]
                stats["boss_padded_tokens"] = target.size(0) * (src_tokens.size(1)
                                                                + target.size(1))
            if np.isfinite(stats.get("threshold", np.nan)):
                stats["n"] = 1  # averaged over workers: value sums plus a count
            else:  # no loss has reached the Assistant yet: nothing to average
                for key in _AVERAGED:
                    stats.pop(key, None)
        # every rank logs the same keys, dummy batches too: fairseq sums them in one
        # all-reduce that expects identical keys everywhere
        logging_output = dict(logging_output)
        for key in _LOGGED:
            logging_output["aa_" + key] = float(stats.get(key, 0.0))
        return loss, sample_size, logging_output

    def _trace(self, itr, update_num: int, ids: np.ndarray) -> None:
        if self._trace_file is None:
            os.makedirs(self.cfg.assistant_trace_dir, exist_ok=True)
            path = os.path.join(self.cfg.assistant_trace_dir, f"trained.rank{itr.shard_id}.tsv")
            self._trace_file = open(path, "a", buffering=1)  # a line per batch: crash-safe
        self._trace_file.write(f"{itr.epoch}\t{update_num}\t{','.join(map(str, ids.tolist()))}\n")

    def _before_update(self, itr: AutoAssistEpochBatchIterator, update_num: int) -> None:
        """Annealing by updates, and the batch plans of all ranks before a checkpoint."""
        itr.flush_losses()  # the previous update's: its step has ended
        cfg = self.cfg
        if cfg.assistant_anneal > 0 and (cfg.max_update or 0) > 0 \
                and update_num >= (1.0 - cfg.assistant_anneal) * cfg.max_update:
            itr.client.start_annealing()
        n = update_num + 1  # fairseq's update count once this update is done
        if (cfg.save_interval_updates or 0) > 0 and n % cfg.save_interval_updates == 0 \
                or (cfg.max_update or 0) > 0 and n >= cfg.max_update \
                or itr.end_of_epoch():
            itr.sync_checkpoint_state()

    def reduce_metrics(self, logging_outputs, criterion):
        super().reduce_metrics(logging_outputs, criterion)
        if not any("aa_boss_tokens" in log for log in logging_outputs):
            return

        def total(key):
            return float(sum(log.get(key, 0) for log in logging_outputs))

        if total("aa_failed") and self.train_iterator is not None:
            # the logs are summed over all ranks: every rank stops at this same update
            self.train_iterator.stop_on_failure()
        for key in _SUMMED:
            metrics.log_scalar_sum("_aa_" + key, total("aa_" + key))
        for key in self.totals:
            self.totals[key] += total("aa_" + key)
        metrics.log_derived("aa_accept_sent", functools.partial(
            _ratio, "_aa_accepted_pairs", "_aa_considered_pairs"))
        metrics.log_derived("aa_accept_tok", functools.partial(
            _ratio, "_aa_accepted_tokens", "_aa_considered_tokens"))
        metrics.log_derived("aa_wait_s", lambda meters: round(meters["_aa_wait_seconds"].sum, 3))
        n = total("aa_n")
        if n:
            for key, name in _AVERAGED.items():
                metrics.log_scalar(name, total("aa_" + key) / n, n, round=3)
        for key, name in _COUNTED.items():
            value = total("aa_" + key)
            if value:
                metrics.log_scalar_sum(name, value)
        # cumulative over the run (and across resumes): read at print time
        totals = self.totals
        metrics.log_derived("aa_boss_tok", lambda meters: int(totals["boss_tokens"]))
        metrics.log_derived("aa_skip_tok", lambda meters: int(
            totals["considered_tokens"] - totals["accepted_tokens"]))

    # -- checkpoints ----------------------------------------------------------------------
    def get_checkpoint_dict(self) -> dict:
        """The run's cumulative token counts (the Assistant itself is saved with the train
        iterator's state, which fairseq restores at resume)."""
        return {type(self).__name__: {"totals": dict(self.totals)}}

    def set_checkpoint_dict(self, state: dict) -> None:
        self.totals.update(state.get("totals", {}))


# The keys of the statistics every rank logs at every step (as "aa_" + key), by how the
# ranks' values are combined: summed over the interval, averaged over the ranks that had a
# value (a count "n" rides along), or summed and shown only when not zero.
_SUMMED = ("considered_pairs", "considered_tokens", "accepted_pairs", "accepted_tokens",
           "boss_tokens", "boss_padded_tokens", "wait_seconds")
_AVERAGED = {"accuracy": "aa_acc", "chance": "aa_acc_base", "threshold": "aa_T",
             "lambda": "aa_lambda", "unlearnable": "aa_unlearnable"}
_COUNTED = {"dropped_losses": "aa_dropped", "nonfinite": "aa_nonfinite"}
_LOGGED = _SUMMED + tuple(_AVERAGED) + tuple(_COUNTED) + ("failed", "n")


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


def _refuse_batching_flags(kwargs: dict) -> None:
    """Raise, naming the flag and why, for a fairseq batching flag that is set but that
    AutoAssist batches cannot honour (silently ignoring it would train something else)."""
    for name, why in _REFUSED.items():
        if kwargs.get(name):
            raise ValueError(f"{why}: drop it with --task autoassist_translation")


def stored_sizes(dataset) -> Optional[np.ndarray]:
    """Sentence lengths as binarised, under fairseq's wrappers (truncation, BOS, ...)."""
    while isinstance(dataset, BaseWrapperDataset):
        dataset = dataset.dataset
    return None if dataset is None else dataset.sizes


def _ratio(num, den, meters):
    d = meters[den].sum
    return round(meters[num].sum / d, 4) if d else 1.0


def _all_gather(obj):
    import torch.distributed as dist

    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out
