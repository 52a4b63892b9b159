"""Step 3 of the data flow, Boss side: the collation of an epoch's batches, as fairseq's own
``EpochBatchIterator`` does it: a ``DataLoader`` with ``--num-workers`` processes over the
stream's batches (each sample tagged with what the training step needs on the CPU), behind
a ``BufferedIterator`` of ``--data-buffer-size``.

That buffer fills from a daemon thread. A daemon thread that is inside a torch operation when
the interpreter finalizes, a tensor's deallocation included, is ended inside C++ code, which
aborts the process ("terminate called without an active exception", SIGABRT) after the run
has ended; on a GPU, where the Boss keeps the thread busy, it happened after a killed
Assistant. So with ``--num-workers 0`` (collation in that thread) the thread's torch work is
done in sections of :data:`EXIT_GUARD`: each batch's fetch and collation, and the dropping
of its references to a batch the trainer may already have dropped (its tensors are then
freed there). At exit no new section starts, the one under way is waited for, and the
thread parks. (fairseq's own iterator runs the same risk; its ``DataLoader`` does torch
work around the fetch too, which is why the fetch is done here.)
"""

import atexit
import functools
import threading

import numpy as np
import torch
from fairseq.data.iterators import BackgroundConsumer, BufferedIterator, _sentinel

from ..proctitle import set_title
from .batch_generator import weights_of


class ExitGuard:
    """Sections of torch work that must not be under way when the interpreter finalizes.

    ``enter`` opens a section unless :meth:`close` has run; ``close`` (at exit) refuses new
    sections and waits, at most *timeout* seconds, for the open ones to leave."""

    def __init__(self):
        self._cond = threading.Condition()
        self._open = 0
        self._closing = False

    def enter(self) -> bool:
        with self._cond:
            if self._closing:
                return False
            self._open += 1
            return True

    def leave(self) -> None:
        with self._cond:
            self._open -= 1
            self._cond.notify_all()

    def close(self, timeout: float = 10.0) -> None:
        with self._cond:
            self._closing = True
            self._cond.wait_for(lambda: self._open == 0, timeout)


EXIT_GUARD = ExitGuard()
atexit.register(EXIT_GUARD.close)


def _park():
    """Block this daemon thread for good (the interpreter is exiting), holding its
    references: a wait on a lock, which the interpreter's exit ends safely."""
    threading.Event().wait()


def collated_batches(itr, count: int, buffer_size: int):
    """The next *count* batches of *itr*'s stream, collated (prepared *buffer_size* ahead
    by a background thread when > 0)."""
    batches = _Collated(itr, count)
    return _GuardedBuffer(buffer_size, batches) if buffer_size > 0 else batches


class _GuardedBuffer(BufferedIterator):
    """fairseq's ``BufferedIterator`` with a :class:`_GuardedConsumer` as its thread."""

    def _create_consumer(self):
        self._consumer = _GuardedConsumer(
            self._queue, self._iterable, self.total,
            torch.cuda.current_device() if torch.cuda.is_available() else None)
        self._consumer.daemon = True
        self._consumer.start()


class _GuardedConsumer(BackgroundConsumer):
    """fairseq's buffer thread, except that its reference to each batch is dropped inside an
    :data:`EXIT_GUARD` section: the trainer may have taken and dropped the batch already, and
    then the tensors are freed here."""

    def run(self):
        if self.cuda_device is not None:
            torch.cuda.set_device(self.cuda_device)
        try:
            for item in self._source:
                self._queue.put(item)
                if not EXIT_GUARD.enter():
                    _park()
                del item
                EXIT_GUARD.leave()
                self.count += 1
                if self._max_len is not None and self.count >= self._max_len:
                    break
            self._queue.put(_sentinel)
        except Exception as e:
            self._queue.put(e)


class _Collated:
    """``count`` batches of the stream, collated as fairseq's ``DataLoader`` does (with
    ``--num-workers`` processes), each sample tagged with what the Boss's step needs on the
    CPU. *itr* is the ``AutoAssistEpochBatchIterator`` whose stream, client, dataset and
    collater they use."""

    def __init__(self, itr, count: int):
        self.itr, self.count = itr, count

    def __len__(self):
        return self.count

    def _next_ids(self):
        itr = self.itr
        return itr.stream.next_batch(itr.client.next_window).ids.tolist()

    def __iter__(self):
        itr = self.itr
        if itr.num_workers == 0:
            yield from self._collate_here()
            return
        loader = torch.utils.data.DataLoader(
            itr.dataset, batch_sampler=(self._next_ids() for _ in range(self.count)),
            collate_fn=itr.collate_fn, num_workers=itr.num_workers,
            worker_init_fn=functools.partial(_title_loader, itr.shard_id))
        for k, sample in enumerate(loader):
            yield _tag(sample, itr.stream.issued[k])

    def _collate_here(self):
        """What ``DataLoader``'s single-process fetcher does (``collate_fn`` of the samples),
        each batch's torch work an :data:`EXIT_GUARD` section, the previous batch's reference
        dropped inside the next one; waiting for a window is not (it may last), and after
        the guard closes the thread touches torch no more."""
        itr = self.itr
        for k in range(self.count):
            ids = self._next_ids()
            if not EXIT_GUARD.enter():
                _park()  # the interpreter is exiting; `tagged` (a batch) is not dropped
            try:
                tagged = _tag(itr.collate_fn([itr.dataset[i] for i in ids]),
                              itr.stream.issued[k])
            finally:
                EXIT_GUARD.leave()
            yield tagged


def _title_loader(rank: int, worker: int) -> None:
    set_title(f"autoassist-loader (rank {rank}, worker {worker})", f"aa-loader-{rank}-{worker}")


def _tag(sample: dict, batch) -> dict:
    """Add ``sample["autoassist"]``: the dataset ids in the sample's order, its real token
    count (read here on the CPU so the training step needs no device sync) and the batch's
    run-wide number."""
    sample_ids = sample["id"].numpy()
    tokens = int(sample["net_input"]["src_lengths"].sum()) + int(sample["ntokens"])
    sample["autoassist"] = {"ids": sample_ids.astype(np.int64), "tokens": tokens,
                            "seq": batch.seq}
    if batch.weights is not None:
        sample["autoassist_weight"] = torch.from_numpy(
            weights_of(sample_ids, batch.ids, batch.weights))
    return sample
