"""The loop of the Assistant process: learn from losses, hand out batches.

It never blocks for long on either queue: while the Boss has enough batches queued, it
keeps learning from the losses that arrive; every wait is ``POLL_INTERVAL`` at most, so
it notices a stop request or a dead parent within a fraction of a second.
"""

import os
import queue
import signal
import sys
import traceback

from threadpoolctl import threadpool_limits

from ..proctitle import set_title

from .messages import (POLL_INTERVAL, STOP, AssistantError, BeginEpoch, LoadState, LossMsg,
                       StateRequest)

# Loss messages learned from between two attempts to hand a window to the Boss.
_MAX_LOSS_MSGS_PER_TURN = 64


def run(make_assistant, make_generator, boss_q, loss_q, control_q, reply_q, stop_event,
        parent_pid, rank=0):
    """Entry point of the child process (see :class:`AssistantProcess`).

    Args:
        boss_q (multiprocessing.Queue): windows for the Boss (bounded).
        reply_q (multiprocessing.Queue): state replies, and the traceback if the loop fails.
    """
    # Ctrl-C reaches the whole process group: let the Boss decide when it stops.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    set_title(f"autoassist-assistant (rank {rank})", f"aa-assistant-{rank}")
    try:
        _single_threaded()
        assistant, generator = make_assistant(), make_generator()
        _single_threaded()  # again, for the BLAS libraries the builders loaded
        _loop(assistant, generator, boss_q, loss_q, control_q, reply_q, stop_event,
              parent_pid)
    except BaseException:  # relay everything, KeyboardInterrupt included
        _never_wait_at_exit(boss_q)
        reply_q.put(AssistantError(traceback.format_exc()))
        reply_q.close()
        reply_q.join_thread()  # the traceback must reach the Boss before the exit
        os._exit(1)
    _never_wait_at_exit(boss_q, reply_q)


def _single_threaded():
    """numpy/BLAS and torch threads would compete with the Boss for the same cores.

    The child is forked after numpy (and maybe torch) started its thread pools, so
    environment variables come too late: the pools are resized in place. Libraries loaded
    later read the variables.
    """
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
    threadpool_limits(1)
    if "torch" in sys.modules:  # never import torch here only to limit it
        sys.modules["torch"].set_num_threads(1)


def _never_wait_at_exit(*queues):
    """A queue's feeder thread would block the exit while the Boss is not reading."""
    for q in queues:
        q.cancel_join_thread()


def _loop(assistant, generator, boss_q, loss_q, control_q, reply_q, stop_event, parent_pid):
    counters = {"loss_msgs": 0}
    producing, pending = False, None
    # The data pass last announced to the Assistant, so that a rule can use per-pass
    # settings; one fairseq epoch may span passes, so it follows the generator.
    begin_pass = getattr(assistant, "begin_epoch", None)
    announced = None
    while not stop_event.is_set() and os.getppid() == parent_pid:
        # 1. control messages first: they change what is produced
        while True:
            try:
                msg = control_q.get_nowait()
            except queue.Empty:
                break
            if msg is STOP:
                return
            if isinstance(msg, BeginEpoch):
                generator.begin(msg)
                producing, pending = True, None
            elif isinstance(msg, StateRequest):
                _drain_losses(assistant, loss_q, counters, limit=None)
                reply_q.put((msg.token, {"assistant": assistant.state_dict(),
                                         "stats": dict(assistant.stats, **counters)}))
            elif isinstance(msg, LoadState):
                assistant.load_state_dict(msg.state)
            else:
                raise TypeError(f"unexpected control message {msg!r}")
        # 2. learn from what the Boss reported
        learned = _drain_losses(assistant, loss_q, counters, limit=_MAX_LOSS_MSGS_PER_TURN)
        # 3. produce the next window with the current state, and hand it over
        if producing and pending is None:
            if begin_pass is not None and generator.epoch != announced:
                announced = generator.epoch
                begin_pass(announced)
            pending = generator.next_window(assistant.accept_probability)
            if pending is None:
                producing = False
            else:
                pending.stats = dict(assistant.stats, **counters)
        if pending is not None:
            try:
                boss_q.put(pending, timeout=POLL_INTERVAL)
                pending = None
            except queue.Full:
                pass
        elif not learned:
            _wait_for_loss(assistant, loss_q, counters)


def _learn(assistant, msg, counters):
    if not isinstance(msg, LossMsg):
        raise TypeError(f"unexpected message on the loss queue: {msg!r}")
    if len(msg.ids):
        assistant.learn(msg.ids, msg.losses)
    counters["loss_msgs"] += 1


def _drain_losses(assistant, loss_q, counters, limit):
    n = 0
    while limit is None or n < limit:
        try:
            msg = loss_q.get_nowait()
        except queue.Empty:
            break
        _learn(assistant, msg, counters)
        n += 1
    return n


def _wait_for_loss(assistant, loss_q, counters):
    try:
        msg = loss_q.get(timeout=POLL_INTERVAL)
    except queue.Empty:
        return
    _learn(assistant, msg, counters)
