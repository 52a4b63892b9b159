"""Step 4 of the data flow: the ``autoassist_translation`` task, where the Boss trains.

It is fairseq's ``translation`` task with one change to training: the train subset's
batches come from this worker's Assistant (``get_batch_iterator``), and every training
step reports its per-sentence losses back (``train_step``). Validation, ``fairseq-generate``
and ``fairseq-interactive`` are those of ``translation``.
"""

import functools
import logging
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
from fairseq import metrics, utils
from fairseq.data import data_utils
from fairseq.dataclass import ChoiceEnum
from fairseq.tasks import register_task
from fairseq.tasks.translation import TranslationConfig, TranslationTask

from ..assistant import Assistant, AssistantHParams
from ..assistant.process import AssistantProcess
from ..data.batch_generator import BatchGenerator
from ..data.batch_iterator import AutoAssistEpochBatchIterator
from ..features.store import FeatureStore, build_command, dataset_fingerprint, feature_prefix
from ..losses import capture_token_losses, check_criterion, per_sentence_loss

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
    assistant_window: int = field(
        default=4096, metadata={"help": "candidates (a slice of the length order) scored together"})
    assistant_boss_queue_size: int = field(
        default=4, metadata={"help": "windows of batches the assistant may prepare ahead"})
    assistant_loss_queue_size: int = field(
        default=256, metadata={"help": "loss messages that may wait for the assistant; "
                                       "the oldest is dropped when full"})
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


@register_task("autoassist_translation", dataclass=AutoAssistTranslationConfig)
class AutoAssistTranslationTask(TranslationTask):
    """Translation with AutoAssist batches (`Zhang et al., 2019
    <https://arxiv.org/abs/1905.11371>`_): a CPU Assistant learns which pairs the Boss still
    finds hard and leaves easy ones out of its batches.
    """

    cfg: AutoAssistTranslationConfig

    def __init__(self, cfg: AutoAssistTranslationConfig, src_dict, tgt_dict):
        super().__init__(cfg, src_dict, tgt_dict)
        self.hparams = AssistantHParams.from_config(cfg)  # bad values fail before any data
        if cfg.assistant_window < 1:
            raise ValueError(f"--assistant-window={cfg.assistant_window} must be >= 1")
        for name in ("assistant_boss_queue_size", "assistant_loss_queue_size"):
            if getattr(cfg, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')}={getattr(cfg, name)} must be >= 1")
        self.features: Optional[FeatureStore] = None
        self.train_iterator: Optional[AutoAssistEpochBatchIterator] = None
        self.totals = {"boss_tokens": 0.0, "boss_padded_tokens": 0.0,
                       "considered_tokens": 0.0, "accepted_tokens": 0.0}

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
        fingerprint = dataset_fingerprint(
            dataset.src_sizes, dataset.tgt_sizes,
            [f"{data_path}/dict.{src}.txt", f"{data_path}/dict.{tgt}.txt"])
        store = FeatureStore.open(prefix, fingerprint=fingerprint, num_rows=len(dataset),
                                  rebuild_hint=build_command(data_path, split, src, tgt))
        logger.info(f"AutoAssist features: {prefix} ({store.num_rows} pairs, dim {store.dim})")
        return store

    # -- batches ----------------------------------------------------------------------
    def get_batch_iterator(self, dataset, max_tokens=None, max_sentences=None,
                           max_positions=None, ignore_invalid_inputs=False,
                           required_batch_size_multiple=1, seed=1, num_shards=1, shard_id=0,
                           num_workers=0, epoch=1, **kwargs):
        """The Assistant's iterator for the train subset; fairseq's for everything else."""
        if dataset is not self.datasets.get(self.cfg.train_subset) or self.features is None:
            return super().get_batch_iterator(
                dataset, max_tokens=max_tokens, max_sentences=max_sentences,
                max_positions=max_positions, ignore_invalid_inputs=ignore_invalid_inputs,
                required_batch_size_multiple=required_batch_size_multiple, seed=seed,
                num_shards=num_shards, shard_id=shard_id, num_workers=num_workers,
                epoch=epoch, **kwargs)
        if self.train_iterator is not None and self.train_iterator.dataset is dataset:
            return self.train_iterator  # one iterator, one Assistant, for the whole run
        if self.train_iterator is not None:
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
        start_process = functools.partial(
            AssistantProcess, functools.partial(Assistant, self.features, self.hparams),
            make_generator, boss_queue_size=self.cfg.assistant_boss_queue_size,
            loss_queue_size=self.cfg.assistant_loss_queue_size)
        self.train_iterator = AutoAssistEpochBatchIterator(
            dataset, dataset.collater, make_generator(), start_process, epoch=epoch,
            fallback=self.cfg.assistant_fallback, num_shards=num_shards, shard_id=shard_id,
            all_gather=_all_gather if num_shards > 1 else None,
            reweight=self.cfg.assistant_reweight)
        return self.train_iterator

    # -- the Boss's step ------------------------------------------------------------------
    def build_criterion(self, cfg):
        criterion = super().build_criterion(cfg)
        check_criterion(criterion)
        return criterion

    def train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False):
        itr = self.train_iterator
        if itr is None or ignore_grad or not sample:  # dummy batches teach nothing
            loss, sample_size, logging_output = super().train_step(
                sample, model, criterion, optimizer, update_num, ignore_grad)
            stats = {}
        else:
            with capture_token_losses(criterion, sample.get("autoassist_weight")) as captured:
                loss, sample_size, logging_output = super().train_step(
                    sample, model, criterion, optimizer, update_num, ignore_grad)
            itr.report_losses(*per_sentence_loss(captured.token_losses, sample,
                                                 self.tgt_dict.pad()))
            stats = itr.pop_log_stats()
            src_tokens, target = sample["net_input"]["src_tokens"], sample["target"]
            stats["boss_tokens"] = int(sample["net_input"]["src_lengths"].sum()) \
                + int(sample["ntokens"])
            stats["boss_padded_tokens"] = target.size(0) * (src_tokens.size(1) + target.size(1))
            if np.isfinite(stats.get("threshold", np.nan)):
                stats["n"] = 1  # averaged over workers: value sums plus a count
            else:  # no loss has reached the Assistant yet: nothing to average
                for key in ("threshold", "lambda", "accuracy", "chance"):
                    stats.pop(key, None)
        # every rank logs the same keys, dummy batches too: fairseq sums them in one
        # all-reduce that expects identical keys everywhere
        logging_output = dict(logging_output)
        for key in _LOGGED:
            logging_output["aa_" + key] = float(stats.get(key, 0.0))
        return loss, sample_size, logging_output

    def reduce_metrics(self, logging_outputs, criterion):
        super().reduce_metrics(logging_outputs, criterion)
        if not any("aa_boss_tokens" in log for log in logging_outputs):
            return

        def total(key):
            return float(sum(log.get(key, 0) for log in logging_outputs))

        for key in ("considered_pairs", "considered_tokens", "accepted_pairs",
                    "accepted_tokens", "boss_tokens", "boss_padded_tokens", "wait_seconds"):
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
            for key, name in (("accuracy", "aa_acc"), ("chance", "aa_acc_base"),
                              ("threshold", "aa_T"), ("lambda", "aa_lambda")):
                metrics.log_scalar(name, total("aa_" + key) / n, n, round=3)
        topup = total("aa_topup_pairs")
        if topup:  # pairs added to complete the epoch's fixed batch count
            metrics.log_scalar_sum("aa_topup", topup)
        dropped = total("aa_dropped_losses")
        if dropped:
            metrics.log_scalar_sum("aa_dropped", dropped)
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


_LOGGED = ("considered_pairs", "considered_tokens", "accepted_pairs", "accepted_tokens",
           "topup_pairs", "wait_seconds", "dropped_losses", "boss_tokens", "boss_padded_tokens", "n",
           "threshold", "lambda", "accuracy", "chance")


def _ratio(num, den, meters):
    d = meters[den].sum
    return round(meters[num].sum / d, 4) if d else 1.0


def _all_gather(obj):
    import torch.distributed as dist

    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out
