"""``autoassist-features``: build the TF-IDF feature file of a binarised fairseq dataset.

Example::

    fairseq-preprocess --source-lang en --target-lang de ... --destdir data-bin/wmt14
    autoassist-features data-bin/wmt14 --source-lang en --target-lang de
"""

import argparse
import filecmp
import glob
import logging
import os
import sys
import tempfile
import time
from typing import Optional, Tuple

import numpy as np
import scipy.sparse as sp
from tqdm import tqdm

from .binarised import dataset_prefix, open_side
from .fingerprint import dataset_fingerprint, token_files, token_fingerprint
from ..console import configure_logging
from ..checks.settings import check_available
from ..checks.columns import (REGISTRY, PairCheckSettings, add_settings_arguments,
                          pair_check_columns, settings_from_args)
from .store import FeatureStore, feature_prefix
from .tfidf import count_matrix, tfidf_features
from ..checks.words import Pieces

logger = logging.getLogger("autoassist_fairseq.features")

_CHUNK = 200_000  # sentences per progress-bar step


def read_side(prefix: str) -> Tuple[np.ndarray, np.ndarray]:
    """All token ids of one binarised side and their sentence offsets.

    The token stream is read in one piece from the ``.bin`` file (memory-mapped for
    fairseq's default ``mmap`` format) where its sentences lie in order; otherwise sentence
    by sentence.
    """
    from fairseq.data import indexed_dataset

    dataset = open_side(prefix)
    sizes = np.asarray(dataset.sizes, dtype=np.int64)
    offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    if isinstance(dataset, indexed_dataset.MMapIndexedDataset):
        index = dataset._index
        itemsize = np.dtype(index.dtype).itemsize
        if np.array_equal(np.asarray(index._pointers, dtype=np.int64), offsets[:-1] * itemsize):
            tokens = np.frombuffer(dataset._bin_buffer, dtype=index.dtype, count=int(offsets[-1]))
            # copy: the buffer is unmapped when *dataset* is garbage-collected
            return tokens.astype(np.int64), offsets
    elif len(sizes) == len(dataset) and \
            np.array_equal(np.asarray(dataset.data_offsets, dtype=np.int64), offsets):
        # lazy / cached: one flat stream of the index's dtype, sentence after sentence
        tokens = np.fromfile(indexed_dataset.data_file_path(prefix), dtype=dataset.dtype,
                             count=int(offsets[-1]))
        if len(tokens) == offsets[-1]:
            return tokens.astype(np.int64) - int(dataset.fix_lua_indexing), offsets
    tokens = np.empty(int(offsets[-1]), dtype=np.int64)
    for i in tqdm(range(len(sizes)), desc=f"read {os.path.basename(prefix)}", unit="sent",
                  mininterval=1.0, disable=None):
        tokens[offsets[i]:offsets[i + 1]] = dataset[i].numpy()
    return tokens, offsets


def read_pieces(prefix: str, symbols) -> Pieces:
    """The subword pieces of one binarised side (the langid check's input; special symbols
    left out)."""
    tokens, offsets = read_side(prefix)
    special = np.zeros(len(symbols), dtype=bool)
    special[[i for i, sym in enumerate(symbols) if sym in ("<s>", "<pad>", "</s>", "<unk>")]] = True
    kept = ~special[tokens]
    # int32 ids: the whole side stays in memory until the check has read it
    return Pieces(tokens[kept].astype(np.int32), np.concatenate(([0], np.cumsum(kept)))[offsets],
                  symbols)


def read_counts(data_dir: str, src: str, tgt: str, split: str = "train"):
    """Subword counts of both sides of a binarised split (pairs x dictionary), their
    sentence lengths, the dictionaries' symbols and paths."""
    from fairseq.data import Dictionary

    if not os.path.isdir(data_dir):
        raise FileNotFoundError(f"data directory not found: {data_dir} (give the --destdir "
                                "of fairseq-preprocess)")
    dict_paths = [os.path.join(data_dir, f"dict.{lang}.txt") for lang in (src, tgt)]
    if not glob.glob(os.path.join(glob.escape(data_dir), "dict.*.txt")):
        raise FileNotFoundError(f"{data_dir} holds no fairseq-preprocess output (no dict.*.txt): "
                                "give the --destdir of fairseq-preprocess (or the data "
                                "directory of scripts/prepare-corpus.sh)")
    for path in dict_paths:
        if not os.path.exists(path):
            raise FileNotFoundError(f"dictionary not found: {path}; check --source-lang/"
                                    "--target-lang against the files fairseq-preprocess wrote")
    prefixes = [dataset_prefix(data_dir, split, src, tgt, lang) for lang in (src, tgt)]
    counts, sizes, symbols = [], [], []
    for path, prefix in zip(dict_paths, prefixes):
        dictionary = Dictionary.load(path)
        symbols.append(dictionary.symbols)
        tokens, offsets = read_side(prefix)
        sizes.append(np.diff(offsets))
        ignore = (dictionary.bos(), dictionary.pad(), dictionary.eos())
        chunks = []
        for start in tqdm(range(0, len(offsets) - 1, _CHUNK), desc=f"count {os.path.basename(prefix)}",
                          unit="chunk", disable=None):
            stop = min(start + _CHUNK, len(offsets) - 1)
            chunks.append(count_matrix(tokens[offsets[start]:offsets[stop]],
                                       offsets[start:stop + 1] - offsets[start], len(dictionary), ignore))

        counts.append(sp.vstack(chunks, format="csr") if chunks else
                      sp.csr_matrix((0, len(dictionary)), dtype=np.float32))
    return counts, sizes, symbols, dict_paths


def check_writable(output: str) -> None:
    """Refuse a feature file prefix *output* whose folder cannot be written, before any work
    (the build takes minutes on a large corpus): the folder is created where missing, and a
    file is created in it and removed.

    Raises:
        OSError: the folder cannot be created or written; the message names it and the fix.
    """
    folder = os.path.dirname(os.path.abspath(output))
    try:
        os.makedirs(folder, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".autoassist-features.", suffix=".tmp")
        os.close(fd)
        os.remove(probe)
    except OSError as err:
        raise OSError(err.errno, f"cannot write the feature file {output}.*: the folder {folder} "
                                 f"is not writable ({err.strerror or err}); give --prefix in a "
                                 f"folder this user can write, e.g. --prefix "
                                 f"~/features/{os.path.basename(output)}, and train with "
                                 "--assistant-features at the same prefix") from None


def build_features(data_dir: str, src: str, tgt: str, split: str = "train",
                   output: Optional[str] = None,
                   settings: Optional[PairCheckSettings] = None) -> str:
    """Compute and store the features and pair checks (*settings*: which run, and their
    thresholds; default :class:`PairCheckSettings`) of one split at path prefix *output*
    (default: :func:`~.store.feature_prefix`); returns the file prefix.

    Raises:
        OSError: the output's folder cannot be written (checked before any work), or a
            write failed (:meth:`.FeatureStore.save`: nothing of the new file is left).
    """
    settings = settings or PairCheckSettings()
    check_available(settings)
    output = output or feature_prefix(data_dir, split, src, tgt)
    if os.path.isdir(data_dir):  # a missing DATA is named by read_counts
        check_writable(output)
    counts, sizes, symbols, dict_paths = read_counts(data_dir, src, tgt, split)
    if counts[0].shape[0] == 0:
        raise ValueError(f"{data_dir}: the {split} split holds no pair: check the preparation "
                         "(its cleaning or fairseq-preprocess's input)")
    features = tfidf_features(*counts)
    # the language check needs one vocabulary on both sides (--joined-dictionary)
    prefixes = [dataset_prefix(data_dir, split, src, tgt, lang) for lang in (src, tgt)]
    sides = [read_pieces(prefix, side_symbols) for prefix, side_symbols in zip(prefixes, symbols)] \
        if "langid" in settings.checks else None
    checks = pair_check_columns(*counts, languages=filecmp.cmp(*dict_paths, shallow=False),
                                symbols=symbols, settings=settings, texts=sides, langs=(src, tgt))
    FeatureStore.save(output, features, {
        "split": split, "source_lang": src, "target_lang": tgt,
        "src_dim": counts[0].shape[1], "tgt_dim": counts[1].shape[1],
        "fingerprint": dataset_fingerprint(sizes[0], sizes[1], dict_paths),
        "tokens": token_fingerprint(token_files(prefixes)),
    }, pair_check_columns=checks, pair_check_settings=settings)
    return output


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="autoassist-features",
        description="Build the TF-IDF features of every source-target pair of a binarised "
                    "fairseq dataset (the output of fairseq-preprocess), for the AutoAssist task.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example:\n  autoassist-features data-bin/wmt14 --source-lang en "
               "--target-lang de --split train")
    parser.add_argument("data_dir", help="directory written by fairseq-preprocess")
    parser.add_argument("-s", "--source-lang", required=True, help="source language")
    parser.add_argument("-t", "--target-lang", required=True, help="target language")
    parser.add_argument("--split", default="train",
                        help="dataset split whose features to build (default: train)")
    parser.add_argument("--prefix", default=None,
                        help="path prefix of the files to write (default: "
                             "DATA/SPLIT.SRC-TGT.autoassist); train with the same "
                             "--assistant-features PREFIX")
    add_settings_arguments(parser)
    return parser


def cli_main(argv=None) -> int:
    args = get_parser().parse_args(argv)
    configure_logging()
    start = time.perf_counter()
    try:
        prefix = build_features(args.data_dir, args.source_lang, args.target_lang, args.split,
                                args.prefix, settings_from_args(args))
    except (FileNotFoundError, ValueError) as err:
        logger.error(str(err))
        return 1
    except OSError as err:  # the output cannot be written: the message names it and the fix
        logger.error(err.strerror or str(err))
        return 1
    store = FeatureStore.open(prefix)
    seconds = time.perf_counter() - start
    logger.info(f"wrote {prefix}.{{json,indptr.npy,indices.npy,data.npy}}: {store.num_rows} pairs, "
                f"dim {store.dim}, {store.meta['nnz']} nonzeros in {seconds:.1f}s "
                f"({store.num_rows / max(seconds, 1e-9):,.0f} pairs/s)")
    checks = store.meta["pair_checks"]
    share = checks["flagged"] / max(store.num_rows, 1)
    ran = checks["settings"]["checks"]
    logger.info(f"pair checks ({', '.join(ran) or 'none'}): "
                f"{checks['flagged']} pairs ({share:.2%}) flagged, trained at the floor unless "
                f"--assistant-pair-checks off: " + ", ".join(
                    f"{checks[c.count_key]} {c.flags}" for c in REGISTRY
                    if c.name in ran and c.count_key in checks))
    if "language" in ran and not checks["languages"]:  # asked for, but could not run
        logger.info("the language check did not run: it needs one dictionary for both sides "
                    "(fairseq-preprocess --joined-dictionary)")
    return 0


if __name__ == "__main__":
    sys.exit(cli_main())
