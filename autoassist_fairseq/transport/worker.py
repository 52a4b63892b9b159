"""The loop of the Assistant process: learn from losses, hand out batches.

Everything the Boss sends arrives on one pipe, in the order it was sent: losses and
control messages. The loop reads up to ``_MAX_MSGS_PER_TURN`` of them between two
attempts to hand a window over, so a state request is answered after every loss sent
before it. It never blocks for long: while the Boss has enough windows, it keeps learning;
every wait is ``POLL_INTERVAL`` at most, so it notices a stop request or a dead parent
within a fraction of a second.
"""

import os
import signal
import sys
import traceback

from threadpoolctl import threadpool_limits

from ..proctitle import set_title
from .channel import Sender
from .messages import (JOIN_TIMEOUT, POLL_INTERVAL, STOP, WINDOWS_IN_FLIGHT, AssistantError,
                       RestartStream, LoadState, LossMsg, StateRequest)

# Messages read between two attempts to hand a window to the Boss.
_MAX_MSGS_PER_TURN = 64


def run(make_assistant, make_generator, inbox, windows_conn, replies_conn, stop_event,
        parent_pid, rank=0, received=None, boss_ends=()):
    """Entry point of the child process (see :class:`AssistantProcess`).

    Args:
        inbox (Connection): losses and control messages from the Boss, in order.
        windows_conn (Connection): windows for the Boss.
        replies_conn (Connection): state replies, and the traceback if the loop fails.
        received (multiprocessing.RawValue, optional): windows the Boss has received.
        boss_ends (tuple of Connection, optional): the Boss's ends of the three pipes,
            which the fork copied; closed at once, so that a read of the inbox ends
            (``EOFError``) when the Boss dies, even halfway through a message.
    """
    for conn in boss_ends:
        conn.close()
    # Ctrl-C reaches the whole process group: let the Boss decide when it stops.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    set_title(f"autoassist-assistant (rank {rank})", f"aa-assistant-{rank}")
    windows = Sender(windows_conn, name="autoassist-windows-sender")
    replies = Sender(replies_conn, name="autoassist-replies-sender")
    try:
        _single_threaded()
        assistant, generator = make_assistant(), make_generator()
        _single_threaded()  # again, for the BLAS libraries the builders loaded
        _loop(assistant, generator, inbox, windows, replies, stop_event, parent_pid, received)
    except BaseException:  # relay everything, KeyboardInterrupt included
        replies.put(AssistantError(traceback.format_exc()))
        replies.flush(JOIN_TIMEOUT)  # the traceback must reach the Boss before the exit
        os._exit(1)


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


def _loop(assistant, generator, inbox, windows, replies, stop_event, parent_pid,
          received=None):
    counters = {"loss_msgs": 0}
    state = {"producing": False, "pending": None}
    sent = 0  # windows handed to the sender; at most WINDOWS_IN_FLIGHT not received yet
    # The data pass last announced to the Assistant, so that a rule can use per-pass
    # settings; one fairseq epoch may span passes, so it follows the generator.
    announced = None
    while not stop_event.is_set() and os.getppid() == parent_pid:
        # 1. the Boss's messages, in the order sent
        read = 0
        while read < _MAX_MSGS_PER_TURN and inbox.poll(0):
            msg = inbox.recv()
            read += 1
            if msg is STOP:
                return
            _handle(msg, assistant, generator, replies, counters, state)
        # 2. produce the next window with the current state, and hand it over
        if state["producing"] and state["pending"] is None:
            if generator.data_pass != announced:
                announced = generator.data_pass
                assistant.begin_pass(announced)
            pending = generator.next_window(assistant.accept_probability)
            if pending is None:
                state["producing"] = False
            else:
                pending.stats = dict(assistant.stats, **counters)
            state["pending"] = pending
        unreceived = sent - received.value if received is not None else len(windows)
        if state["pending"] is not None and unreceived < WINDOWS_IN_FLIGHT:
            windows.put(state["pending"])
            state["pending"] = None
            sent += 1
        elif not read:
            inbox.poll(POLL_INTERVAL)  # nothing to do until the Boss sends or takes


def _handle(msg, assistant, generator, replies, counters, state):
    if isinstance(msg, LossMsg):
        if len(msg.ids):
            assistant.learn(msg.ids, msg.losses)
        counters["loss_msgs"] += 1
    elif isinstance(msg, RestartStream):
        generator.begin(msg)
        state["producing"], state["pending"] = True, None
    elif isinstance(msg, StateRequest):
        replies.put((msg.token, {"assistant": assistant.state_dict(),
                                 "stats": dict(assistant.stats, **counters)}))
    elif isinstance(msg, LoadState):
        assistant.load_state_dict(msg.state)
    else:
        raise TypeError(f"unexpected message from the Boss: {msg!r}")
