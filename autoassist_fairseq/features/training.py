"""The feature file of a training run, and which of its pairs the pair checks flag.

:func:`open_train_features` is the one place that decides both: it opens the file checked
against the dataset (lengths, dictionaries, token ids) and turns ``--assistant-pair-checks``
(``auto``, ``require``, ``off``) and the rule into the pairs the Assistant accepts at most at
the floor 1 - lambda_max. The Assistant only applies that answer.
"""

import glob
import logging
import os
from typing import NamedTuple, Optional

import numpy as np
from fairseq.data import BaseWrapperDataset

from .binarised import dataset_prefix, open_side
from .fingerprint import dataset_fingerprint, token_files, token_fingerprint
from .store import FeatureFileDamaged, FeatureStore, build_command, feature_prefix

logger = logging.getLogger(__name__)


class TrainFeatures(NamedTuple):
    store: FeatureStore
    suspect: Optional[np.ndarray]  # a bool per pair; None: no pair checks


def open_train_features(cfg, split: str, dataset, data_path: str,
                        pair_check_mode: str) -> TrainFeatures:
    """The feature file of *split* (``--assistant-features``, or its default place) and the
    pairs to treat as suspect.

    Args:
        cfg (AutoAssistTranslationConfig): the task's config.
        split (str): the train subset.
        dataset (LanguagePairDataset): the loaded *split*.
        data_path (str): the data directory *split* was loaded from.
        pair_check_mode (str): ``auto`` (used when the file has them, else a warning),
            ``require`` (a file without them raises) or ``off``, as checked by
            :func:`~..tasks.config.check_config`.

    Raises:
        FileNotFoundError, PermissionError, ValueError: the file is missing, unreadable or
            for other data; or it has no usable pair checks under ``require``.
    """
    src, tgt = cfg.source_lang, cfg.target_lang
    parts = sorted(glob.glob(os.path.join(glob.escape(data_path), f"{split}1.*-*.*.idx")))
    if parts:  # fairseq's load_langpair_dataset joins SPLIT, SPLIT1, SPLIT2, ... for training
        raise ValueError(f"{data_path} holds {os.path.basename(parts[0])[:-4]} besides "
                         f"{split}: fairseq trains on the parts joined, but a feature file "
                         f"describes one binarised split; binarise the training data as one "
                         f"{split} split, or give the parts as data shards (--data a:b, one an "
                         "epoch, each with its own features)")
    # the sizes as binarised: --truncate-source, --prepend-bos and --append-source-id
    # change the wrapped dataset's sizes, not the pairs the features describe
    store = open_checked_features(data_path, split, src, tgt, stored_sizes(dataset.src),
                                  stored_sizes(dataset.tgt), len(dataset),
                                  cfg.assistant_features)
    logger.info(f"AutoAssist features: {store.prefix} ({store.num_rows} pairs, dim {store.dim})")
    return TrainFeatures(store, _suspect_pairs(store, pair_check_mode, str(cfg.assistant_rule)))


def check_data_shards(cfg, split: str, paths, loaded: str) -> None:
    """Check the feature file of every data shard of ``--data a:b`` other than *loaded*
    before training starts, as :func:`open_train_features` checks the loaded one: each
    shard is opened only at its own epoch, and a missing or stale file must not stop a run
    hours in. (One ``--assistant-features`` prefix for several shards is refused by
    :func:`~..tasks.config.check_config`.)

    Raises:
        FileNotFoundError, PermissionError, ValueError: as :func:`open_checked_features`,
            naming the shard and the command that builds its file.
    """
    if len(paths) < 2:
        return
    assert not cfg.assistant_features, "refused with several shards by tasks.config"
    src, tgt = cfg.source_lang, cfg.target_lang
    for path in paths:
        if path == loaded:
            continue
        sizes = []
        for lang in (src, tgt):
            prefix = dataset_prefix(path, split, src, tgt, lang)
            side = open_side(prefix)
            # a copy: the sizes of an mmap dataset live in its map, unmapped with the object
            sizes.append(np.array(side.sizes, dtype=np.int64))
        open_checked_features(path, split, src, tgt, sizes[0], sizes[1], len(sizes[0]))
    logger.info(f"AutoAssist features: the files of all {len(paths)} data shards checked")


def open_checked_features(data_path: str, split: str, src: str, tgt: str, src_sizes,
                          tgt_sizes, num_rows: int, prefix: Optional[str] = None) -> FeatureStore:
    """The feature file at *prefix* (default: the split's default place), checked against
    the binarised split it describes: its pair count, lengths, dictionaries and token ids.
    Every error quotes the command that rebuilds it."""
    prefix = prefix or feature_prefix(data_path, split, src, tgt)
    fingerprint = dataset_fingerprint(
        src_sizes, tgt_sizes, [f"{data_path}/dict.{src}.txt", f"{data_path}/dict.{tgt}.txt"])
    tokens = token_fingerprint(token_files(
        [dataset_prefix(data_path, split, src, tgt, lang) for lang in (src, tgt)]))
    return FeatureStore.open(prefix, fingerprint=fingerprint, num_rows=num_rows,
                             rebuild_hint=build_command(data_path, split, src, tgt, prefix),
                             tokens=tokens)


def _suspect_pairs(store: FeatureStore, pair_check_mode: str, rule: str) -> Optional[np.ndarray]:
    if pair_check_mode == "off" or rule == "random":  # the random control skips at random
        return None
    try:
        suspect = np.asarray(store.suspect_pairs())
    except FeatureFileDamaged:
        raise  # a damaged file stops the run under auto too: only absent checks turn off
    except (FileNotFoundError, ValueError) as err:
        if pair_check_mode == "require":
            raise
        logger.warning(f"AutoAssist pair checks off: {err} (--assistant-pair-checks off "
                       "turns them off without this warning)")
        return None
    count = int(np.count_nonzero(suspect))
    logger.info(f"AutoAssist pair checks: {count} pairs ({count / max(store.num_rows, 1):.2%}) "
                "with a side in the wrong language or unrelated sides, accepted at the "
                "floor (--assistant-pair-checks off: not used)")
    return suspect


def stored_sizes(dataset) -> Optional[np.ndarray]:
    """Sentence lengths as binarised, under fairseq's wrappers (truncation, BOS, ...)."""
    while isinstance(dataset, BaseWrapperDataset):
        dataset = dataset.dataset
    return None if dataset is None else dataset.sizes
