"""Whether a checkpoint file is whole, before fairseq reads it.

fairseq reads a checkpoint with ``torch.load``: an empty file ends in a bare ``EOFError``,
and bytes overwritten inside a tensor load without complaint (torch does not verify the
archive's checksums), so the run later fails far from the cause. ``torch.save`` writes a
zip archive with a CRC-32 per part; reading every part through :mod:`zipfile` checks them
all, at about the speed of reading the file once.
"""

import os
import zipfile
import zlib

_ZIP = b"PK\x03\x04"
_PICKLE = b"\x80"  # torch's legacy format: a pickle, protocol 2 or later
_CHUNK = 1 << 24


class CheckpointFileError(ValueError):
    """A checkpoint file that is empty, cut, damaged or not a checkpoint at all."""


def check_checkpoint_file(path: str, fix: str) -> None:
    """Raise :class:`CheckpointFileError`, naming *path* and *fix*, unless *path* is a file
    that ``torch.save`` wrote whole: not empty, a zip archive whose every part matches its
    CRC-32 (or a legacy pickle, which holds no checksum to verify)."""
    size = os.path.getsize(path)
    if size == 0:
        raise CheckpointFileError(f"{path} is empty (0 bytes: a save that was cut off, e.g. "
                                  f"by a full disk or a kill); {fix}")
    with open(path, "rb") as f:
        head = f.read(len(_ZIP))
    if head[:1] == _PICKLE:
        return
    if head != _ZIP:
        raise CheckpointFileError(f"{path} is not a checkpoint (not a file that torch.save "
                                  f"writes); {fix}")
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
                                  f"since it was saved); {fix}") from None


def resume_checkpoint(save_dir: str, restore_file: str) -> str:
    """The file fairseq-train resumes from (``checkpoint_utils.load_checkpoint``): the
    default ``--restore-file checkpoint_last.pt`` in ``--save-dir``, else the path given."""
    if restore_file == "checkpoint_last.pt":
        return os.path.join(save_dir, restore_file)
    return restore_file
