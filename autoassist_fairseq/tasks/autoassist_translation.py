"""Step 4 of the data flow: the ``autoassist_translation`` task, where the Boss trains.

It is fairseq's ``translation`` task with one change to training: the train subset's
batches come from this worker's Assistant (``get_batch_iterator``), and every training
step reports its per-sentence losses back (``train_step``). Validation, ``fairseq-generate``
and ``fairseq-interactive`` are those of ``translation``. The flags and their checks are in
:mod:`.config`, the feature file in :mod:`..features.training`, the step's losses in
:mod:`..losses`, the ``aa_*`` metrics in :mod:`..metrics`.
"""

import functools
import logging
from typing import Optional

import numpy as np
from fairseq import utils
from fairseq.data import data_utils
from fairseq.tasks import register_task
from fairseq.tasks.translation import TranslationTask

from .. import metrics as aa_metrics
from ..checkpoint_file import check_resume_checkpoint
from ..assistant import Assistant
from ..data.batch_generator import BatchGenerator
from .batch_iterator import AutoAssistEpochBatchIterator
from ..data.run_points import RunPoints
from ..features.store import FeatureStore
from ..features.training import check_data_shards, open_train_features
from .train_step import BatchTrace, train_step_with_losses
from ..transport.local_source import LocalSource, pipeline_lag
from ..transport.process import AssistantProcess
from .config import (AutoAssistTranslationConfig, check_config, check_criterion,
                     refuse_batching_flags)
from .data_checks import check_batch_bound, check_data_dir, check_language_pair
from .rank_states import all_gather_data_parallel

logger = logging.getLogger(__name__)


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
        paths = utils.split_paths(cfg.data)
        for path in paths[1:]:  # the other data shards (--data a:b) are folders too
            check_data_dir(path)
        check_language_pair(paths[0], cfg.source_lang, cfg.target_lang)
        return super().setup_task(cfg, **kwargs)

    def __init__(self, cfg: AutoAssistTranslationConfig, src_dict, tgt_dict):
        super().__init__(cfg, src_dict, tgt_dict)
        self.hparams, self.pair_check_mode = check_config(cfg)  # bad values fail before any data
        self.features: Optional[FeatureStore] = None
        self.suspect: Optional[np.ndarray] = None  # the pairs the pair checks flag
        self.train_iterator: Optional[AutoAssistEpochBatchIterator] = None
        self._trace: Optional[BatchTrace] = None

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        super().load_dataset(split, epoch=epoch, combine=combine, **kwargs)
        if split == self.cfg.train_subset:
            paths = utils.split_paths(self.cfg.data)
            path = paths[(epoch - 1) % len(paths)]
            if self.features is None:  # the run's first load: every shard's file, up front
                check_data_shards(self.cfg, split, paths, path)
            self.features, self.suspect = open_train_features(
                self.cfg, split, self.datasets[split], path, self.pair_check_mode)

    def get_batch_iterator(self, dataset, max_tokens=None, max_sentences=None,
                           max_positions=None, ignore_invalid_inputs=False,
                           required_batch_size_multiple=1, seed=1, num_shards=1, shard_id=0,
                           num_workers=0, epoch=1, data_buffer_size=0, **kwargs):
        """The Assistant's iterator for the trainer's train subset; fairseq's for everything
        else, the train subset included where validation (``--valid-subset train``) or
        ``fairseq-generate --gen-subset train`` asks for it: only fairseq's
        ``Trainer.get_train_iterator`` passes ``update_epoch_batch_itr``."""
        if "update_epoch_batch_itr" not in kwargs \
                or dataset is not self.datasets.get(self.cfg.train_subset) or self.features is None:
            try:
                return super().get_batch_iterator(
                    dataset, max_tokens=max_tokens, max_sentences=max_sentences,
                    max_positions=max_positions, ignore_invalid_inputs=ignore_invalid_inputs,
                    required_batch_size_multiple=required_batch_size_multiple, seed=seed,
                    num_shards=num_shards, shard_id=shard_id, num_workers=num_workers,
                    epoch=epoch, data_buffer_size=data_buffer_size, **kwargs)
            except AssertionError as err:  # fairseq's batch_by_size: a pair over --max-tokens
                if not str(err).startswith("Sentences lengths should not exceed max_tokens"):
                    raise
                split = next((k for k, d in self.datasets.items() if d is dataset), "given")
                check_batch_bound(dataset.num_tokens_vec(np.arange(len(dataset))), max_tokens,
                                  split)
                raise
        refuse_batching_flags(kwargs)
        if self.train_iterator is not None and self.train_iterator.dataset is dataset:
            return self.train_iterator  # one iterator, one Assistant, for the whole run
        handover = None
        if self.train_iterator is not None:  # the next shard of --data a:b
            handover = self.train_iterator.export_handover(self.features.dim)
            self.train_iterator.shutdown()
        dataset.set_epoch(epoch)
        with data_utils.numpy_seed(seed):
            indices = dataset.ordered_indices()
        if max_positions is not None:
            indices = self.filter_indices_by_size(indices, dataset, max_positions,
                                                  ignore_invalid_inputs)
        check_batch_bound(dataset.num_tokens_vec(indices), max_tokens, self.cfg.train_subset)
        cfg = self.cfg
        make_generator = functools.partial(
            BatchGenerator, indices, dataset.src_sizes, dataset.tgt_sizes, max_tokens=max_tokens,
            max_sentences=max_sentences, required_batch_size_multiple=required_batch_size_multiple,
            window_size=cfg.assistant_window, seed=seed, num_shards=num_shards,
            shard_id=shard_id)
        generator = make_generator()
        make_assistant = functools.partial(Assistant, self.features, self.hparams, self.suspect)
        points = RunPoints.from_config(cfg)
        if cfg.assistant_sync:
            lag = pipeline_lag(num_workers, data_buffer_size, points.update_freq)
            start_source = functools.partial(LocalSource, generator, make_assistant, lag)
            logger.info(f"AutoAssist --assistant-sync: windows are made in this process from "
                        f"the losses of the batches up to {lag} before each window")
        else:
            start_source = functools.partial(
                AssistantProcess, make_assistant, make_generator,
                boss_queue_size=cfg.assistant_boss_queue_size,
                loss_queue_size=cfg.assistant_loss_queue_size, rank=shard_id)
        self.train_iterator = AutoAssistEpochBatchIterator(
            dataset, dataset.collater, generator, start_source, epoch=epoch,
            fallback=cfg.assistant_fallback, num_shards=num_shards, shard_id=shard_id,
            all_gather=all_gather_data_parallel if num_shards > 1 else None,
            reweight=cfg.assistant_reweight, num_workers=num_workers,
            buffer_size=data_buffer_size, points=points, handover=handover,
            data_shard_per_epoch=len(utils.split_paths(cfg.data)) > 1,
            data_id=self._data_id(dataset), pass_log=cfg.assistant_pass_log)
        return self.train_iterator

    def _data_id(self, dataset) -> Optional[dict]:
        """The training data's identity for the checkpoint: its pair count and the
        fingerprint its feature file was checked against (of the token ids where the file
        records one, else of the lengths and dictionaries)."""
        if self.features is None:
            return None
        fingerprint = self.features.meta.get("tokens") or self.features.meta.get("fingerprint")
        return None if fingerprint is None else {"pairs": len(dataset), "fingerprint": fingerprint}

    def build_model(self, cfg, from_checkpoint=False):
        """fairseq's model; in fairseq-train (not from a checkpoint, as generate builds it),
        first the check that the checkpoint the run will resume from is whole: fairseq-train
        reads it after this, where an empty file ends in a bare EOFError and overwritten
        bytes load unnoticed."""
        if not from_checkpoint:
            check_resume_checkpoint(self.cfg)
        return super().build_model(cfg, from_checkpoint)

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
        step = functools.partial(super().train_step, sample, model, criterion, optimizer,
                                 update_num, ignore_grad)
        if itr is None or ignore_grad or not sample or "autoassist" not in sample:
            (loss, sample_size, logging_output), stats = step(), {}  # dummy batches teach nothing
        else:
            if self._trace is None and self.cfg.assistant_trace_dir:
                self._trace = BatchTrace(self.cfg.assistant_trace_dir, itr.shard_id)
            (loss, sample_size, logging_output), stats = train_step_with_losses(
                step, itr, sample, criterion, update_num, self.tgt_dict.pad(), self._trace)
        return loss, sample_size, aa_metrics.logging_output(stats, logging_output)

    def reduce_metrics(self, logging_outputs, criterion):
        super().reduce_metrics(logging_outputs, criterion)
        itr = self.train_iterator
        if itr is None:
            aa_metrics.reduce(logging_outputs, None)
        else:
            summed = aa_metrics.reduce(logging_outputs, itr.run_totals,
                                       on_failure=itr.stop_on_failure)
            if summed is not None:  # every rank, after the step: the states a save needs
                itr.end_update(summed)

