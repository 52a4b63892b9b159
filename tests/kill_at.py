"""fairseq-train, killed at a chosen point, as a kill from outside would find it but at a
point the test chooses, not at a time:

    python tests/kill_at.py POINT fairseq-train ARGS...

POINT is one of
- ``write:N``: the Nth time fairseq writes a save's first file (``torch.save`` into
  ``checkpointN.pt.tmp``, ``checkpoint_best.pt.tmp`` or ``checkpoint_last.pt.tmp``, renamed
  once complete), half of its bytes are written, then SIGKILL;
- ``copy:NAME:N``: the Nth time fairseq copies a save's first file to NAME (in place, e.g.
  ``checkpoint_last.pt``), half of the bytes, then SIGKILL;
- ``update:N:SIG``: when the step after update N starts (in the middle of the training),
  the signal SIG (e.g. ``SIGTERM``) to this process, after a line ``CHILDREN pid ...``.

A line ``KILL <point> <path or update>`` comes before the signal.
"""

import io
import os
import signal
import sys


def _children():
    try:
        with open(f"/proc/{os.getpid()}/task/{os.getpid()}/children") as f:
            return f.read().split()
    except FileNotFoundError:
        return []


POINT = sys.argv[1] if len(sys.argv) > 1 else ""


def _kill(what, sig=signal.SIGKILL):
    print(f"KILL {POINT} {what}", flush=True)
    sys.stderr.flush()
    os.kill(os.getpid(), sig)


def _cut(path, data):
    with open(path, "wb") as f:
        f.write(data[:len(data) // 2])
        f.flush()
        os.fsync(f.fileno())
    _kill(path)


def main():
    point, *spec = POINT.split(":")
    calls = [0]
    from fairseq import checkpoint_utils, trainer
    from fairseq.file_io import PathManager

    if point == "write":
        real_save = checkpoint_utils._torch_persistent_save

        def save(obj, f):
            calls[0] += 1
            if calls[0] < int(spec[0]):
                return real_save(obj, f)
            import torch

            buffer = io.BytesIO()
            torch.save(obj, buffer)
            f.close()
            _cut(f.name, buffer.getvalue())

        checkpoint_utils._torch_persistent_save = save
    elif point == "copy":
        name, nth = spec
        real_copy = PathManager.copy

        def copy(src_path, dst_path, overwrite=False):
            if os.path.basename(dst_path) == name:
                calls[0] += 1
                if calls[0] == int(nth):
                    with open(src_path, "rb") as f:
                        _cut(dst_path, f.read())
            return real_copy(src_path, dst_path, overwrite)

        PathManager.copy = staticmethod(copy)
    elif point == "update":
        after, sig = int(spec[0]), getattr(signal, spec[1])
        real_step = trainer.Trainer.train_step

        def train_step(self, samples, raise_oom=False):
            if self.get_num_updates() == after:
                print("CHILDREN " + " ".join(_children()), flush=True)
                _kill(after, sig)
            return real_step(self, samples, raise_oom)

        trainer.Trainer.train_step = train_step
    else:
        sys.exit(f"unknown point {POINT}")
    from fairseq_cli.train import cli_main

    sys.argv = sys.argv[2:]
    cli_main()


if __name__ == "__main__":
    main()
