"""What ``autoassist-filter`` writes to, checked before any work and replaced whole.

An --out folder is new, empty, or an earlier output of the command, which :data:`MARKER`
marks; anything else, another corpus above all, is refused. The corpus is built in a
temporary folder beside it and renamed into place when complete (:func:`move_into_place`),
so a failure leaves an earlier output as it was.
"""

import errno
import os
import shutil
import tempfile
from pathlib import Path

# written last into every output: an --out that holds it is an earlier output of this command
MARKER = "autoassist-filter.json"


def check_out(out: Path) -> None:
    """Refuse an --out that cannot be the filtered corpus's folder, before any work: a file,
    a folder under a file, or a folder that holds anything but an earlier output of this
    command (which holds :data:`MARKER`). A new or empty folder is taken."""
    existing = out
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        what = "is a file" if existing == out else f"is under the file {existing}"
        raise ValueError(f"--out {out} {what}: give a directory for the filtered corpus (a new "
                         "one, or the --out of an earlier autoassist-filter)")
    if existing != out or (out / MARKER).is_file():
        return
    held = sorted(p.name for p in out.iterdir())
    if held:
        shown = ", ".join(held[:4]) + (f" and {len(held) - 4} more" if len(held) > 4 else "")
        raise ValueError(f"--out {out} already holds {shown}, and is not an output of "
                         f"autoassist-filter (no {MARKER}): it would be replaced; give a new "
                         f"folder for the filtered corpus, or remove {out} first if it may go")


def check_scores_out(path: Path) -> None:
    """Refuse a --scores-out that cannot be written as a file, before any work: a folder, or
    a path under a file or in a folder this user cannot write."""
    if path.is_dir():
        raise ValueError(f"--scores-out {path} is a folder: give the path of the TSV to write, "
                         f"e.g. {path / 'scores.tsv'}")
    existing = path.resolve().parent
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir() or not os.access(existing, os.W_OK):
        raise ValueError(f"--scores-out {path}: {existing} is not a folder this user can write; "
                         "give a path elsewhere")


def move_into_place(building: Path, out: Path) -> None:
    """Rename the complete folder *building* to *out*; an earlier *out* (checked by
    :func:`check_out`) is set aside first and removed only once the new one is in place."""
    if not out.exists():
        os.rename(building, out)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".old", dir=out.parent))
    os.rename(out, old / out.name)
    try:
        os.rename(building, out)
    except BaseException:
        os.rename(old / out.name, out)
        shutil.rmtree(old, ignore_errors=True)
        raise
    shutil.rmtree(old, ignore_errors=True)


def write_error(err: OSError, out: Path) -> str:
    """The message for a failed write of *out*: the file, the cause, and the fix."""
    where = f"{err.filename}: " if err.filename else ""
    cause = err.strerror or str(err)
    if err.errno is not None and err.filename:
        # a file of the temporary folder the corpus is built in (gone now): its name alone,
        # and the cause without advice given for another command's flags
        where, cause = f"{Path(err.filename).name}: ", os.strerror(err.errno)
    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        fix = (f"free space on the disk of {Path(out).resolve().parent} (df -h "
               f"{Path(out).resolve().parent}), or give --out on another disk")
    elif err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        fix = "give --out in a folder this user can write"
    else:
        fix = "fix the cause and run the command again"
    return (f"writing {out} failed: {where}{cause}; {out} is as it was before the command "
            f"(nothing of the new corpus is left); {fix}")
