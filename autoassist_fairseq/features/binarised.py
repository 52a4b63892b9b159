"""The binarised sides of ``fairseq-preprocess``: where a split's side is, and its reader.

Both the Boss (:mod:`.training` opens the train split's sides to check the feature file
against them) and ``autoassist-features`` use these; the module imports fairseq's reader
alone, inside the functions, so that the Boss's path loads nothing of the features' build.
"""

import os
import re
from typing import List, Optional, Tuple

# <split>.<src>-<tgt>.<lang>.idx, as fairseq-preprocess writes them
# (fairseq's data_utils.infer_language_pair reads the same part of the name)
_BINARY = re.compile(r"^([^.]+)\.([^.\-]+)-([^.\-]+)\.([^.\-]+)\.idx$")


def binarised_pairs(data_dir: str, split: Optional[str] = None) -> List[Tuple[str, str]]:
    """The (src, tgt) pairs of the binarised sides in *data_dir* (of *split* alone, if
    given), sorted: the one parser of fairseq-preprocess's file names."""
    pairs = set()
    for name in os.listdir(data_dir):
        m = _BINARY.match(name)
        if m and m.group(4) in m.group(2, 3) and split in (None, m.group(1)):
            pairs.add((m.group(2), m.group(3)))
    return sorted(pairs)


def dataset_prefix(data_dir: str, split: str, src: str, tgt: str, lang: str) -> str:
    """Prefix of the binarised side *lang* of a split, in either direction as
    fairseq's translation task accepts it; raises with the fix when missing."""
    from fairseq.data import indexed_dataset

    prefixes = [os.path.join(data_dir, f"{split}.{a}-{b}.{lang}")
                for a, b in ((src, tgt), (tgt, src))]
    for prefix in prefixes:
        if indexed_dataset.dataset_exists(prefix, impl=None):
            return prefix
    for prefix in prefixes:
        if os.path.isfile(prefix):  # the text itself: fairseq-preprocess --dataset-impl raw
            raise ValueError(
                f"{prefix} is raw text (fairseq-preprocess --dataset-impl raw): the features "
                f"are built from binarised data (.bin/.idx: --dataset-impl mmap, fairseq-"
                f"preprocess's default, or lazy or cached); binarise it again without "
                f"--dataset-impl raw: fairseq-preprocess --source-lang {src} --target-lang {tgt} "
                f"... --destdir {data_dir}")
    found = sorted(f for f in os.listdir(data_dir) if f.startswith(split + ".")) \
        if os.path.isdir(data_dir) else []
    raise FileNotFoundError(
        f"Dataset not found: {split}.{src}-{tgt}.{lang} in {data_dir} "
        f"(files for split {split!r}: {', '.join(found) or 'none'}). Check --source-lang/"
        f"--target-lang/--split, or binarise the data first with fairseq-preprocess "
        f"--source-lang {src} --target-lang {tgt} --destdir {data_dir}"
    )


def open_side(prefix: str):
    """fairseq's indexed dataset of one binarised side, whose sentences can be read one by
    one: the ``mmap`` format of ``fairseq-preprocess`` (its default), or ``lazy`` or
    ``cached`` (one format on disk, of ids + 1 as TorchNet's; read as ``lazy``, since the
    ``cached`` reader holds no sentence before a prefetch, and with the ids shifted back as
    fairseq loads it). Any other raises ValueError with the fix."""
    from fairseq.data import indexed_dataset

    impl = indexed_dataset.infer_dataset_impl(prefix)
    if impl == "cached":
        impl = "lazy"
    if impl not in ("mmap", "lazy"):
        raise ValueError(f"{prefix}: a side in fairseq's {impl or 'unknown'} format; the "
                         "features are built from binarised sides of fairseq-preprocess "
                         "--dataset-impl mmap (its default), lazy or cached: binarise the data "
                         "again with one of those")
    return indexed_dataset.make_dataset(prefix, impl=impl, fix_lua_indexing=True)
