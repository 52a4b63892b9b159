"""Names for the plugin's child processes in ``ps`` and ``top``.

A Boss worker has two kinds of forked children: its Assistant process and, with
``--num-workers N``, the DataLoader workers that collate its batches. Both map the same
files and look like the Boss in ``ps``; these titles tell them apart. The title goes in
the command line (``ps aux``, ``top -c``) through the ``setproctitle`` package, and a short
form in the kernel's 15-character name (``ps -e``, ``top``); without the package only the
short form is set.
"""

import ctypes
import ctypes.util

_PR_SET_NAME = 15  # prctl option: the calling thread's name (/proc/self/comm)


def set_title(title: str, short: str) -> None:
    """Title this process *title*, with *short* (at most 15 characters) as its name."""
    try:
        import setproctitle
    except ImportError:
        setproctitle = None
    if setproctitle is not None:
        setproctitle.setproctitle(title)
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        libc.prctl(_PR_SET_NAME, short.encode()[:15], 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the command line title is enough
        pass
