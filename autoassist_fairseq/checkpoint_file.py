"""Whether a checkpoint file is whole, before fairseq reads it.

fairseq reads a checkpoint with ``torch.load``: an empty file ends in a bare ``EOFError``,
and bytes overwritten inside a tensor load without complaint (torch does not verify the
archive's checksums), so the run later fails far from the cause. ``torch.save`` writes a
zip archive with a CRC-32 per part; reading every part through :mod:`zipfile` checks them
all, at about the speed of reading the file once.

A save that a kill cuts off leaves the files fairseq wrote before it whole: fairseq writes a
save's first file (``checkpointN.pt``, ``checkpoint_best.pt`` or ``checkpoint_last.pt``) to
a ``.tmp`` and renames it, then copies it, in place and not atomically, to the others, with
``checkpoint_last.pt`` last. A kill in the copy leaves ``checkpoint_last.pt`` cut (the
resume names the newest whole file to go on from: :func:`newest_whole_checkpoint`); a kill
before it leaves ``checkpoint_last.pt`` whole but older than what that save wrote
(:func:`newer_checkpoints`).
"""

import glob
import logging
import os
import re
import zipfile
import zlib

logger = logging.getLogger(__name__)

_ZIP = b"PK\x03\x04"
_PICKLE = b"\x80"  # torch's legacy format: a pickle, protocol 2 or later
_CHUNK = 1 << 24


class CheckpointFileError(ValueError):
    """A checkpoint file that is empty, cut, damaged or not a checkpoint at all."""


def check_checkpoint_file(path: str, fix) -> None:
    """Raise :class:`CheckpointFileError`, naming *path* and *fix* (a string, or a function
    of none that gives it, called only for the error), unless *path* is a file that
    ``torch.save`` wrote whole: not empty, a zip archive whose every part matches its CRC-32
    (or a legacy pickle, which holds no checksum to verify)."""
    try:
        _check(path)
    except CheckpointFileError as err:
        raise CheckpointFileError(f"{err}; {fix() if callable(fix) else fix}") from None


def checkpoint_problem(path: str):
    """What is wrong with checkpoint file *path* (``is damaged (...)``), or None if whole."""
    try:
        _check(path)
    except CheckpointFileError as err:
        return str(err)[len(path) + 1:]
    except OSError as err:
        return f"cannot be read ({err.strerror or err})"
    return None


# the names fairseq's save_checkpoint gives (epoch, update, best, --keep-best-checkpoints;
# any --checkpoint-suffix), not files others put there (evaluate.sh's checkpoint.avgN.pt,
# which holds no training state to resume), nor fairseq's .tmp
_SAVED = re.compile(r"checkpoint(\d+|_\d+_\d+|_best|_last|\.best_.+)[^/]*\.pt")


def _checkpoints_beside(path: str) -> list:
    """The other checkpoints fairseq's saves wrote in *path*'s folder, the newest first."""
    folder = os.path.dirname(path) or "."
    written = {}
    for p in glob.glob(os.path.join(glob.escape(folder), "checkpoint*.pt")):
        if not _SAVED.fullmatch(os.path.basename(p)):
            continue
        try:
            if os.path.isfile(p) and not os.path.samefile(p, path):
                written[p] = os.path.getmtime(p)
        except OSError:  # removed since the listing
            pass
    return sorted(written, key=written.get, reverse=True)  # the newest first


def newest_whole_checkpoint(path: str):
    """The newest whole ``checkpoint*.pt`` beside *path* (by modification time), or None."""
    return next((p for p in _checkpoints_beside(path) if checkpoint_problem(p) is None), None)


def newer_checkpoints(path: str) -> list:
    """``(file, problem or None)`` for each ``checkpoint*.pt`` beside *path* written after
    it, the newest first: none, unless a save was cut off before it rewrote *path* (or
    files were copied in)."""
    written = os.path.getmtime(path)
    return [(p, checkpoint_problem(p)) for p in _checkpoints_beside(path)
            if os.path.getmtime(p) > written]


def _check(path: str) -> None:
    size = os.path.getsize(path)
    if size == 0:
        raise CheckpointFileError(f"{path} is empty (0 bytes: a save that was cut off, e.g. "
                                  f"by a full disk or a kill)")
    with open(path, "rb") as f:
        head = f.read(len(_ZIP))
    if head[:1] == _PICKLE:
        return
    if head != _ZIP:
        raise CheckpointFileError(f"{path} is not a checkpoint (not a file that torch.save "
                                  f"writes)")
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                if info.CRC == 0 and info.file_size > 0:
                    continue  # written without checksums (torch's set_crc32_options(False))
                with archive.open(info) as part:  # raises BadZipFile at a CRC mismatch
                    while part.read(_CHUNK):
                        pass
    except (zipfile.BadZipFile, zlib.error, EOFError, ValueError, NotImplementedError) as err:
        raise CheckpointFileError(f"{path} is damaged ({err}: bytes overwritten or cut off "
                                  f"since it was saved)") from None


def resume_checkpoint(save_dir: str, restore_file: str) -> str:
    """The file fairseq-train resumes from (``checkpoint_utils.load_checkpoint``): the
    default ``--restore-file checkpoint_last.pt`` in ``--save-dir``, else the path given."""
    if restore_file == "checkpoint_last.pt":
        return os.path.join(save_dir, restore_file)
    return restore_file


def check_restore_file_exists(save_dir: str, restore_file: str) -> None:
    """Raise ValueError where ``--restore-file`` names a checkpoint that is not there:
    fairseq-train would start the run afresh without a word (it does so, rightly, only for
    the default, the save dir's ``checkpoint_last.pt`` of a first launch, also when spelt
    out). A model-parallel run's shards (``NAME-shardK.pt``, ``NAME-model_partK.pt``) count."""
    if restore_file == "checkpoint_last.pt" or os.path.abspath(restore_file) == \
            os.path.abspath(os.path.join(save_dir, "checkpoint_last.pt")):
        return
    stem = restore_file[:-3] if restore_file.endswith(".pt") else restore_file
    if os.path.exists(restore_file) or glob.glob(glob.escape(stem) + "-*.pt"):
        return
    raise ValueError(
        f"--restore-file {restore_file} does not exist: fairseq-train would start the run "
        "afresh, without a word; give the path of a checkpoint file (e.g. "
        f"{os.path.join(save_dir, 'checkpoint_best.pt')}), or leave --restore-file out to "
        f"resume from {os.path.join(save_dir, 'checkpoint_last.pt')} (or start afresh where "
        "there is none)")


def check_resume_checkpoint(cfg) -> None:
    """Raise ValueError, naming the file and the fix (the newest whole checkpoint beside it),
    where the checkpoint fairseq-train would resume from (``--save-dir``/``--restore-file``)
    exists but is not whole; warn where the default ``checkpoint_last.pt`` is whole but
    older than checkpoints beside it (a save cut off before its copy to it)."""
    save_dir, restore_file = getattr(cfg, "save_dir", None), getattr(cfg, "restore_file", None)
    if not save_dir or not restore_file:  # a config without the checkpoint group's values
        return
    path = resume_checkpoint(save_dir, restore_file)
    if not os.path.isfile(path):
        check_restore_file_exists(save_dir, restore_file)
        return

    def fix():
        newest = newest_whole_checkpoint(path)
        if newest is None:
            folder = os.path.dirname(path) or "."
            return (f"give --restore-file another checkpoint (no other checkpoint*.pt in "
                    f"{folder} is whole), or remove it to start the run afresh")
        return (f"give --restore-file another checkpoint: the newest whole one beside it is "
                f"{newest} (a save cut off by a kill or a full disk leaves its first file "
                "whole, and checkpoint_last.pt, which fairseq copies last, cut), so resume with "
                f"--restore-file {newest}; or remove it to start the run afresh")

    check_checkpoint_file(path, fix)
    if restore_file != "checkpoint_last.pt":
        return  # a checkpoint chosen by hand: newer ones beside it may be left on purpose
    newer = newer_checkpoints(path)
    if newer:
        whole = [p for p, problem in newer if problem is None]
        logger.warning(
            f"{path}, which this run resumes from, is older than what the last save wrote "
            "before it: " + "; ".join(f"{p}, " + ("whole" if problem is None else
                                                  f"which {problem}") for p, problem in newer)
            + ". That save was cut off (e.g. by a kill) before it rewrote checkpoint_last.pt, "
            "which fairseq copies last. This run goes on from the older checkpoint_last.pt, "
            "whole and consistent"
            + (f"; to go on from the newer save instead, stop it and resume with "
               f"--restore-file {whole[0]}" if whole else "")
            + ("; remove the damaged files, which fairseq-generate or a later resume would "
               "fail on" if len(whole) < len(newer) else ""))
