"""The feature file: a CSR matrix stored as three ``.npy`` arrays plus a JSON header, and
the pair checks (:mod:`..checks.columns`) of every row in a fourth array.

Every worker's Assistant memory-maps the same arrays instead of loading a copy, so N
workers on a machine share one set of pages in the OS page cache. The header records the
row count, the dimensions, a fingerprint of the sentence lengths and dictionaries, and one
of the binarised token ids (:mod:`.fingerprint`); ``open`` checks every file of the set
(header and arrays, each read by :mod:`.store_files`) and refuses one that is damaged or
does not match the dataset it is used with, naming the file and the command that rebuilds it.
"""

import json
import logging
import os
from typing import Optional

import numpy as np
import scipy.sparse as sp

from ..checks.flags import check_languages_differ, flag_counts, flagged
from ..checks.settings import COLUMNS, OLDER_WIDTHS, PairCheckSettings
from .store_files import load_array, prefix_hint, read_header, write_error

FORMAT_VERSION = 1
_ARRAYS = ("indptr", "indices", "data")
_PAIR_CHECKS = "pair-checks"

logger = logging.getLogger(__name__)


class FeatureFileDamaged(ValueError):
    """A feature file whose pair checks are damaged (an array of the wrong shape, settings out
    of range in the header): it stops every run, whatever ``--assistant-pair-checks`` says, as
    a damaged feature file does; only pair checks that are absent or meaningless for the
    corpus turn them off under ``auto``."""


def feature_prefix(data_dir: str, split: str, src: str, tgt: str) -> str:
    """Path prefix of the feature files of one split and language pair."""
    return os.path.join(data_dir, f"{split}.{src}-{tgt}.autoassist")


def build_command(data_dir: str, split: str, src: str, tgt: str,
                  prefix: Optional[str] = None) -> str:
    """The command that (re)builds a feature file at *prefix* (default: the default
    prefix): quoted in every error message."""
    command = f"autoassist-features {data_dir} --source-lang {src} --target-lang {tgt} " \
              f"--split {split}"
    if prefix is not None and os.path.abspath(prefix) != os.path.abspath(
            feature_prefix(data_dir, split, src, tgt)):
        command += f" --prefix {prefix}"
    return command


class FeatureStore:
    """Read-only, memory-mapped TF-IDF features, one row per dataset index.

    Args:
        prefix (str): path prefix as given by :func:`feature_prefix`.
        meta (dict): the JSON header.
    """

    def __init__(self, prefix: str, meta: dict, rebuild_hint: str = ""):
        self.prefix = prefix
        self.meta = meta
        self.rebuild_hint = rebuild_hint
        self.num_rows = int(meta["num_rows"])
        self.dim = int(meta["dim"])
        arrays = {name: np.load(f"{prefix}.{name}.npy", mmap_mode="r") for name in _ARRAYS}
        self.indptr, self.indices, self.data = (arrays[n] for n in _ARRAYS)

    # -- writing -------------------------------------------------------------------
    @staticmethod
    def save(prefix: str, features: sp.csr_matrix, meta: dict,
             pair_check_columns: Optional[np.ndarray] = None,
             pair_check_settings: Optional[PairCheckSettings] = None) -> None:
        """Write *features*, the *pair_check_columns* (pairs x len(COLUMNS),
        :mod:`..checks.columns`; the header records the *pair_check_settings* they ran with and
        flag by) and *meta*.

        Every file is written to a ``.tmp`` beside it first; only when all are complete are
        they renamed into place, the header last, so a crash between the renames leaves no
        header and the file is rebuilt rather than read half-written.

        Raises:
            OSError: a file could not be written (a full disk, no permission): the message
                names the file, the disk and the fix; no ``.tmp`` file is left, and an
                earlier feature file at *prefix* is as it was.
        """
        features = features.tocsr()
        features.sort_indices()
        header_path = prefix + ".json"
        arrays = {
            "indptr": features.indptr.astype(np.int64),
            "indices": features.indices.astype(np.int32),
            "data": features.data.astype(np.float32),
        }
        if pair_check_columns is not None:
            if pair_check_columns.shape != (features.shape[0], len(COLUMNS)):
                raise ValueError(f"pair checks of shape {pair_check_columns.shape} do not fit "
                                 f"{features.shape[0]} feature rows")
            arrays[_PAIR_CHECKS] = pair_check_columns.astype(np.float32)
        meta = dict(meta, version=FORMAT_VERSION, num_rows=features.shape[0],
                    dim=features.shape[1], nnz=int(features.nnz))
        if pair_check_columns is not None:
            # the count only, for the log line; the flags are taken from the array at use
            settings = pair_check_settings or PairCheckSettings()
            meta["pair_checks"] = dict(flag_counts(pair_check_columns, settings),
                                       languages=not np.isnan(pair_check_columns[:, :2]).all(),
                                       columns=list(COLUMNS), settings=settings.to_dict())
        # a new file replaces the old one: a process that maps the old one (a training run)
        # keeps reading it, where a rewrite in place would change it under it
        paths = [f"{prefix}.{name}.npy" for name in arrays] + [header_path]
        path = paths[0]
        try:
            for path, array in zip(paths, arrays.values()):
                with open(path + ".tmp", "wb") as f:
                    np.save(f, array)
            path = header_path
            with open(header_path + ".tmp", "w") as f:
                json.dump(meta, f, indent=1)
        except OSError as err:
            for written in paths:
                try:
                    os.remove(written + ".tmp")
                except OSError:
                    pass
            raise write_error(path, err) from None
        if os.path.exists(header_path):
            os.remove(header_path)
        for path in paths:
            os.replace(path + ".tmp", path)

    # -- reading -------------------------------------------------------------------
    @classmethod
    def open(cls, prefix: str, fingerprint: Optional[str] = None,
             num_rows: Optional[int] = None, rebuild_hint: str = "",
             tokens: Optional[str] = None) -> "FeatureStore":
        """Map a feature file, checking it against the dataset it will be used with.

        Args:
            prefix (str): path prefix of the files.
            fingerprint (str, optional): ``fingerprint.dataset_fingerprint`` of the data.
            num_rows (int, optional): number of pairs in the dataset.
            rebuild_hint (str, optional): command that rebuilds the file, for errors.
            tokens (str, optional): ``fingerprint.token_fingerprint`` of the dataset.

        Raises:
            FileNotFoundError: no feature file at *prefix*, or one of its arrays is missing.
            PermissionError: a file of the set exists but cannot be read.
            ValueError: a file is empty, truncated or belongs to other data.
        """
        fix = f"; build it with: {rebuild_hint}" if rebuild_hint else ""
        rebuild = f"; rebuild it with: {rebuild_hint}" if rebuild_hint else ""
        header_path = prefix + ".json"
        if not os.path.exists(header_path):
            # a path that names a file of the set or a folder: the fix is the prefix, not a build
            raise FileNotFoundError(f"AutoAssist feature file not found: {header_path}"
                                    f"{prefix_hint(prefix) or fix}")
        meta = read_header(header_path, rebuild)
        if meta.get("version") != FORMAT_VERSION:
            raise ValueError(f"{header_path} has format version {meta.get('version')}, "
                             f"expected {FORMAT_VERSION}{rebuild}")
        expected = {"indptr": (meta["num_rows"] + 1, np.int64),
                    "indices": (meta["nnz"], np.int32), "data": (meta["nnz"], np.float32)}
        if "pair_checks" in meta:
            expected[_PAIR_CHECKS] = (None, np.float32)  # its shape: see pair_check_columns()
        for name, (length, dtype) in expected.items():
            path = f"{prefix}.{name}.npy"
            array = load_array(path, rebuild)
            if length is None:
                if array.dtype != dtype or array.ndim != 2:
                    raise ValueError(f"feature file {path} holds {array.shape} {array.dtype}, "
                                     f"expected a ({meta['num_rows']}, {len(COLUMNS)}) "
                                     f"float32 array: it is damaged{rebuild}")
                continue
            if array.shape != (length,) or array.dtype != dtype:
                raise ValueError(f"feature file {path} holds {array.shape} {array.dtype}, "
                                 f"expected ({length},) {np.dtype(dtype)}: it is truncated or "
                                 f"from another build{rebuild}")
        if num_rows is not None and meta["num_rows"] != num_rows:
            raise ValueError(f"feature file {header_path} has {meta['num_rows']} rows but the "
                             f"dataset has {num_rows} pairs: it was built for other data"
                             f"{rebuild}")
        if fingerprint is not None and meta.get("fingerprint") != fingerprint:
            raise ValueError(f"feature file {header_path} does not match the dataset or its "
                             f"dictionaries (fingerprint differs): it was built for other data"
                             f"{rebuild}")
        if tokens is not None and "tokens" not in meta:
            logger.warning(f"feature file {header_path} was built by an older "
                           "autoassist-features, without the fingerprint of the token ids: "
                           "that it describes this text cannot be checked; to check it, "
                           "rebuild it" + (f" with: {rebuild_hint}" if rebuild_hint else ""))
        elif tokens is not None and meta["tokens"] != tokens:
            raise ValueError(f"feature file {header_path} was built for other text: the "
                             "dataset's token ids differ from those it was built from (same "
                             f"sentence lengths and dictionaries){rebuild}")
        store = cls(prefix, meta, rebuild_hint)
        if store.indptr[-1] != meta["nnz"]:
            raise ValueError(f"feature file {prefix}.indptr.npy is inconsistent with its "
                             f"header{rebuild}")
        return store

    def pair_check_columns(self) -> Optional[np.ndarray]:
        """The pair checks, pairs x len(COLUMNS) (columns :data:`..checks.columns.COLUMNS`);
        None when the file was built without them."""
        path = f"{self.prefix}.{_PAIR_CHECKS}.npy"
        if "pair_checks" not in self.meta:
            return None
        checks = load_array(path, f"; rebuild it with: {self.rebuild_hint}"
                             if self.rebuild_hint else "")
        if checks.ndim == 2 and checks.shape[0] == self.num_rows and \
                checks.shape[1] in OLDER_WIDTHS:
            # an older autoassist-features, without the later checks: they did not run
            return np.concatenate([checks, np.full((self.num_rows, len(COLUMNS) - checks.shape[1]),
                                                   np.nan, dtype=np.float32)], axis=1)
        if checks.shape != (self.num_rows, len(COLUMNS)):
            older = " (an older autoassist-features wrote 2 columns, without the unrelated-pair " \
                    "check)" if checks.shape == (self.num_rows, 2) else ""
            raise FeatureFileDamaged(f"{path} holds {checks.shape}, expected ({self.num_rows}, "
                             f"{len(COLUMNS)}){older}: it is truncated or from another build; "
                             "rebuild the features"
                             + (f" with: {self.rebuild_hint}" if self.rebuild_hint else ""))
        return checks

    def suspect_pairs(self) -> np.ndarray:
        """Whether any pair check flags each row's pair (:mod:`..checks.columns`), at the settings
        recorded in the header.

        Raises:
            FileNotFoundError: the file was built without pair checks (an older
                ``autoassist-features``, separate dictionaries, or ``--pair-checks none``).
            ValueError: the sides do not look like two languages to the checks.
        """
        checks = self.pair_check_columns()
        hint = self.rebuild_hint or "autoassist-features DATA --source-lang SRC --target-lang TGT"
        if checks is None:
            raise FileNotFoundError(f"{self.prefix}.json has no pair checks (built by an older "
                                    f"autoassist-features); rebuild the features with: {hint}")
        settings = self.pair_check_settings()
        if not settings.checks:  # an array of NaN columns: nothing ran
            raise FileNotFoundError(f"{self.prefix}.json has no pair checks (built with "
                                    f"--pair-checks none); rebuild the features without that "
                                    f"flag: {hint}")
        check_languages_differ(checks, f"{self.prefix}.json")
        return flagged(checks, settings)

    def pair_check_settings(self) -> PairCheckSettings:
        """The settings the pair checks ran with (a header without them: the settings of
        the older autoassist-features that wrote it)."""
        settings = self.meta.get("pair_checks", {}).get("settings")
        if settings is None:
            return PairCheckSettings(checks=("language", "unrelated"), unrelated_p_value=0.1)
        try:
            return PairCheckSettings.from_dict(settings)
        except ValueError as err:
            raise FeatureFileDamaged(
                f"{self.prefix}.json: {err}" + (f": {self.rebuild_hint}" if self.rebuild_hint
                                                else "")) from None

    def rows(self, ids: np.ndarray) -> sp.csr_matrix:
        """The feature rows of dataset indices *ids*, gathered without a Python loop."""
        ids = np.asarray(ids, dtype=np.int64)
        starts = self.indptr[ids]
        lengths = self.indptr[ids + 1] - starts
        indptr = np.zeros(len(ids) + 1, dtype=np.int64)
        np.cumsum(lengths, out=indptr[1:])
        # positions of every nonzero of the selected rows in the stored arrays
        gather = np.repeat(starts - indptr[:-1], lengths) + np.arange(indptr[-1])
        return sp.csr_matrix(
            (self.data[gather], self.indices[gather], indptr), shape=(len(ids), self.dim)
        )
