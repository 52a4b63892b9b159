"""The parts of a feature file (:mod:`.store`) on disk, one at a time: its JSON header read,
an ``.npy`` array memory-mapped, and the error for a part that cannot be read or written,
each naming the file, the cause and the fix; and what a wrong ``--assistant-features``
most likely meant (a file of the set, or its folder, where the prefix they share is wanted).
"""

import errno
import glob
import json
import os
import shutil

import numpy as np


def unreadable_error(path: str, err: OSError, what: str, fix: str) -> OSError:
    """An error for a feature file that cannot be opened: missing and unreadable differ."""
    if err.errno in (errno.EACCES, errno.EPERM):
        return PermissionError(f"cannot read {what} {path}: permission denied (it exists; "
                               "give this user read access, e.g. chmod a+r)")
    if err.errno == errno.ENOENT:
        return FileNotFoundError(f"{what} {path} is missing{fix}")
    return OSError(f"cannot read {what} {path}: {err.strerror or err}{fix}")


def write_error(path: str, err: OSError) -> OSError:
    """An error for a feature file that could not be written: the file, the cause, the
    disk it is on (with its free space) and the fix."""
    folder = os.path.dirname(os.path.abspath(path))
    cause = err.strerror or str(err)
    code = err.errno
    if code is None and "requested and" in cause:  # numpy's short write: a full disk
        code, cause = errno.ENOSPC, f"{os.strerror(errno.ENOSPC)} (a short write: {cause})"
    try:
        free = f"{shutil.disk_usage(folder).free / 2**20:,.0f} MiB free"
    except OSError:
        free = "free space unknown"
    if code in (errno.EACCES, errno.EPERM, errno.EROFS):
        fix = "give --prefix in a folder this user can write"
    else:
        fix = "free space there, or give --prefix on another disk"
    return OSError(code, f"cannot write the feature file {path}: {cause}; the disk of "
                         f"{folder} has {free} (df -h {folder}); {fix}; nothing of the "
                         "new feature file was left", path)


def load_array(path: str, fix: str, what: str = "feature file") -> np.ndarray:
    """Map a ``.npy`` file; damage (empty, cut, not a ``.npy``) names the file and *fix*."""
    try:
        return np.load(path, mmap_mode="r")
    except OSError as err:
        if err.errno is not None:
            raise unreadable_error(path, err, what, fix) from None
        raise ValueError(f"{what} {path} is damaged ({err}){fix}") from None
    except (ValueError, EOFError) as err:  # empty, cut header, cut data
        raise ValueError(f"{what} {path} is empty or truncated ({err or 'no data'}){fix}") \
            from None


def prefix_hint(prefix: str) -> str:
    """What a wrong ``--assistant-features`` most likely meant: a file of the set, or the
    folder it lies in, where the prefix the files share is wanted."""
    for suffix in (".json", ".indptr.npy", ".indices.npy", ".data.npy", ".pair-checks.npy"):
        if prefix.endswith(suffix) and os.path.exists(prefix):
            return (f" (a prefix is wanted, the path without the file's suffix: "
                    f"--assistant-features {prefix[:-len(suffix)]})")
    if os.path.isdir(prefix):
        found = sorted(glob.glob(os.path.join(glob.escape(prefix), "*.autoassist.json")))
        return (" (a folder: give the files' path prefix, e.g. --assistant-features "
                f"{found[0][:-len('.json')]})" if found else
                " (a folder: give the feature files' path prefix, FOLDER/NAME, not the folder)")
    return ""


def read_header(path: str, rebuild: str) -> dict:
    """The JSON header; an unreadable, empty or cut one names the file and *rebuild*."""
    try:
        with open(path) as f:
            meta = json.load(f)
    except OSError as err:
        raise unreadable_error(path, err, "feature file header", rebuild) from None
    except (ValueError, UnicodeDecodeError) as err:  # JSONDecodeError is a ValueError
        raise ValueError(f"feature file header {path} is empty or damaged (not valid JSON: "
                         f"{err}){rebuild}") from None
    missing = [k for k in ("version", "num_rows", "dim", "nnz") if not isinstance(meta, dict)
               or k not in meta]
    if missing:
        raise ValueError(f"feature file header {path} lacks {', '.join(missing)}: it is "
                         f"damaged{rebuild}")
    return meta
