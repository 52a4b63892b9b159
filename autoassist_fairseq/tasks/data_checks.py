"""The data directory and its pairs against the flags, checked before fairseq reads or
batches them: a folder that is missing, a language pair it does not hold, a pair longer than
``--max-tokens``.

fairseq's ``TranslationTask.setup_task`` infers the pair from the file names when
``--source-lang/--target-lang`` are not given; when they are given but do not match the
data, it fails on a bare ``dict.{lang}.txt`` path. :func:`check_language_pair` turns that
into a message that lists the pairs the directory holds and names the fix.
"""

import os
from typing import List, Optional, Tuple

import numpy as np

from ..features.binarised import binarised_pairs


def language_pairs(data_path: str) -> List[Tuple[str, str]]:
    """The (src, tgt) pairs of the binarised datasets in *data_path* (a directory written
    by ``fairseq-preprocess``), sorted."""
    return binarised_pairs(data_path)


def check_data_dir(data_path: str) -> None:
    """Raise a ``FileNotFoundError`` that names the fix when *data_path* (a folder of
    ``--data``, fairseq-train's first argument) is no folder: fairseq would fail on it in
    ``os.listdir`` with a bare errno."""
    if os.path.isdir(data_path):
        return
    what = "is a file, not a folder" if os.path.exists(data_path) else "does not exist"
    raise FileNotFoundError(
        f"the data directory {data_path} (fairseq-train's first argument) {what}: give the "
        "folder that fairseq-preprocess or scripts/prepare-corpus.sh wrote (its dict.*.txt "
        "and train.*.bin files)")


def check_language_pair(data_path: str, src: Optional[str], tgt: Optional[str]) -> None:
    """Raise a ``FileNotFoundError`` that names the fix when *data_path* lacks the
    dictionaries of the given pair.

    Nothing is checked when either language is None: fairseq then infers the pair from
    the data directory.

    Args:
        data_path (str): the (first) data directory of ``--data``.
        src (str, optional): the ``--source-lang`` given (default: None).
        tgt (str, optional): the ``--target-lang`` given (default: None).

    Raises:
        FileNotFoundError: when *data_path* is not a directory (whether or not the
            languages are given), or when
            ``dict.{src}.txt`` or ``dict.{tgt}.txt`` is missing from it.
        ValueError: when both name the same language.
    """
    check_data_dir(data_path)
    if src is None or tgt is None:
        return
    if src == tgt:
        pairs = language_pairs(data_path)
        raise ValueError(f"--source-lang and --target-lang are both {src!r}: give the two "
                         "languages of the pair (the data holds: "
                         f"{', '.join(f'{a}-{b}' for a, b in pairs) or 'no binarised pair'})")
    missing = [f"dict.{lang}.txt" for lang in (src, tgt)
               if not os.path.isfile(os.path.join(data_path, f"dict.{lang}.txt"))]
    if not missing:
        return
    pairs = language_pairs(data_path)
    if pairs:
        found = ", ".join(f"{s}-{t}" for s, t in pairs)
        s0, t0 = pairs[0]
        fix = (f"drop --source-lang/--target-lang (task.source_lang/task.target_lang) to "
               f"let fairseq infer the pair, or set them to the pair found: "
               f"--source-lang {s0} --target-lang {t0}")
    else:
        found = "none (no <split>.<src>-<tgt>.<lang>.idx files)"
        fix = "point --data at a directory written by fairseq-preprocess (scripts/prepare-corpus.sh)"
    raise FileNotFoundError(
        f"--source-lang {src} --target-lang {tgt} do not match the data in {data_path}: "
        f"{' and '.join(missing)} not found. Language pairs in that directory: {found}. "
        f"Fix: {fix}.")


def check_batch_bound(tokens: np.ndarray, max_tokens: Optional[int], split: str) -> None:
    """Raise ValueError, naming the flag and the fix, where a pair to be batched is longer
    than ``--max-tokens``: no batch can hold it (fairseq's ``batch_by_size`` asserts).
    *tokens*: each pair's tokens as fairseq's batching counts them (the dataset's
    ``num_tokens_vec``)."""
    if not max_tokens or max_tokens <= 0 or not len(tokens):
        return
    longest = int(np.max(tokens))
    if longest > max_tokens:
        over = int(np.sum(tokens > max_tokens))
        raise ValueError(
            f"--max-tokens {max_tokens} is below the longest pair of the {split} split "
            f"({longest} tokens on its longer side; {over} pairs are longer than "
            f"{max_tokens}): a batch holds at least one pair. Give --max-tokens {longest} or "
            "more (e.g. --max-tokens 4096), or leave the longer pairs out with "
            "--max-source-positions/--max-target-positions and "
            "--skip-invalid-size-inputs-valid-test")
