"""The loop of the Assistant process: learn from losses, hand out batches.

It never blocks for long on either queue: while the Boss has enough batches queued, it
keeps learning from the losses that arrive; every wait is ``POLL_INTERVAL`` at most, so
it notices a stop request or a dead parent within a fraction of a second.
"""

import os
import queue
import signal
import traceback

from ..data.messages import (POLL_INTERVAL, STOP, AssistantError, BeginEpoch, LoadState,
                             LossMsg, StateRequest)

# Loss messages learned from between two attempts to hand a window to the Boss.
_MAX_LOSS_MSGS_PER_TURN = 64


def run(make_assistant, make_generator, boss_q, loss_q, control_q, reply_q, error_q,
        stop_event, parent_pid):
    """Entry point of the child process (see :class:`AssistantProcess`)."""
    # Ctrl-C reaches the whole process group: let the Boss decide when we stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # numpy/BLAS threads would compete with the Boss for the same cores.
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
    try:
        _loop(make_assistant(), make_generator(), boss_q, loss_q, control_q, reply_q,
              stop_event, parent_pid)
    except BaseException:  # relay everything, KeyboardInterrupt included
        _never_wait_at_exit(boss_q, reply_q)
        error_q.put(AssistantError(traceback.format_exc()))
        error_q.close()
        error_q.join_thread()  # the traceback must reach the Boss before we go
        os._exit(1)
    _never_wait_at_exit(boss_q, reply_q)


def _never_wait_at_exit(*queues):
    """A queue's feeder thread would block our exit while the Boss is not reading."""
    for q in queues:
        q.cancel_join_thread()


def _loop(assistant, generator, boss_q, loss_q, control_q, reply_q, stop_event, parent_pid):
    counters = {"loss_msgs": 0}
    producing, pending = False, None
    while not stop_event.is_set() and os.getppid() == parent_pid:
        # 1. control messages first: they change what we produce
        while True:
            try:
                msg = control_q.get_nowait()
            except queue.Empty:
                break
            if msg is STOP:
                return
            if isinstance(msg, BeginEpoch):
                if msg.state is not None:
                    generator.load_state_dict(msg.state)
                else:
                    generator.begin_epoch(msg.epoch, msg.num_batches)
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
