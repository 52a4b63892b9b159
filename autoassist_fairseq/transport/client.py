"""The Boss's handle on its Assistant: the source of its windows, and failures.

``AssistantClient`` starts the source of windows (the :class:`AssistantProcess`, or with
``--assistant-sync`` a :class:`~.local_source.LocalSource` in the Boss's process),
(re)starts its stream of windows where the Boss's :class:`BatchStream` stands, hands the
windows out, relays losses and state requests, checks at every training step that the
process is alive, and on a failure falls back to a local source that accepts every pair
(uniform batches). With
``--assistant-fallback error`` a failure stops the run: at once on one worker; on many, it is
recorded and every rank stops at the same update (see the task's ``reduce_metrics``), so no
rank is left waiting in a collective.
"""

import logging
import threading
import time
from typing import Callable, List, Optional

from ..data.batch_generator import BatchGenerator
from ..data.batch_stream import BatchStream
from .local_source import LocalSource
from .process import AssistantDied
from .window_source import WindowSource

logger = logging.getLogger(__name__)

# How often the training thread checks that the Assistant process is alive (seconds).
LIVENESS_INTERVAL = 1.0
FALLBACK_HINT = ("to keep training on uniform batches when the Assistant fails, rerun with "
                 "--assistant-fallback uniform")


class AssistantClient:
    """One worker's Assistant, seen from the Boss.

    Args:
        start_source (callable): starts the source of windows (a :class:`WindowSource`:
            an :class:`~.process.AssistantProcess`, or a :class:`LocalSource`).
        generator (BatchGenerator): the Boss's copy of the shard's generator; makes the
            windows itself after a fallback to uniform batches.
        stream (BatchStream): the Boss's record of the windows it took.
        fallback (str): ``"error"`` or ``"uniform"`` (``--assistant-fallback``).
        num_shards (int): the number of workers.
    """

    def __init__(self, start_source: Callable[[], WindowSource],
                 generator: BatchGenerator, stream: BatchStream, fallback: str = "error",
                 num_shards: int = 1):
        self.start_source = start_source
        self.generator = generator
        self.stream = stream
        self.fallback = fallback
        self.num_shards = num_shards
        self.source: Optional[WindowSource] = None
        self.fell_back = False  # True once the windows are uniform after a failure
        self.annealing = False
        self.accept_all_from: Optional[int] = None  # annealing by updates: a batch number
        self.failure: Optional[str] = None  # a failure every rank must stop on
        # cumulative over the run, whatever source stands: the Boss's wait for windows, and
        # the loss messages of the sources replaced by the fallback that never reached them
        self.wait_seconds = 0.0
        self._dropped_before = 0
        # the Assistant's newest state the Boss holds (loaded, or read for a save): what the
        # checkpoints keep once the Assistant has failed, so that a resumed run goes on from
        # it rather than from nothing
        self._last_state: Optional[dict] = None
        self._next_check = 0.0
        self._failure_lock = threading.RLock()  # the training and a loader thread may fail

    @property
    def started(self) -> bool:
        return self.source is not None

    @property
    def assistant_learns(self) -> bool:
        """Whether an Assistant scores the windows (False after the uniform fallback)."""
        return self.source is None or self.source.learns

    @property
    def accepts_every_pair(self) -> bool:
        """Annealing, or the uniform fallback: no pair is left out (also when a resumed
        stream's windows already accepted every pair, as they go on doing)."""
        taken = self.stream.gen_state or {}
        return self.annealing or not self.assistant_learns or bool(taken.get("accept_all")) \
            or (self.accept_all_from is not None and self.stream.next_seq >= self.accept_all_from)

    @property
    def next_window_accepts_all(self) -> bool:
        """Whether the next window this run makes accepts every pair (annealing, the
        uniform fallback), whatever the windows already taken did."""
        made = int((self.stream.gen_state or {}).get("batches_made", 0))
        return self.annealing or not self.assistant_learns \
            or (self.accept_all_from is not None and made >= self.accept_all_from)

    def start(self, first_pass: int, assistant_state: Optional[dict] = None,
              source: str = "the checkpoint", accept_all_from: Optional[int] = None) -> None:
        """Start the source, give it *assistant_state*, and start its stream of windows
        where the Boss's stream stands (a fresh run: at data pass *first_pass*); the
        windows from batch number *accept_all_from* on accept every pair."""
        self.accept_all_from = accept_all_from
        self.source = self.start_source()
        if self.stream.gen_state is None:  # before the load: a failure there restarts from it
            self.generator.begin_pass(first_pass)
        if assistant_state is not None:
            self._load(assistant_state, source)
        self.restart_stream()

    def _load(self, state: dict, origin: str) -> None:
        try:
            self.source.load(state)
            got = self.source.state()  # as the source now holds it
        except AssistantDied as err:
            self._on_failure(err)
            return
        self._last_state, s = got, got["stats"]
        logger.info(f"restored Assistant state: T_k={s['threshold']:.6f} "
                    f"lambda_k={s['lambda']:.6f} accuracy={s['accuracy']:.6f} "
                    f"after {s['loss_batches']} loss batches (from {origin})")
        changed = describe_settings_change(state.get("settings"),
                                           (got["assistant"] or {}).get("settings"),
                                           len(self.stream.pending))
        if changed:
            logger.warning(changed)

    def restart_stream(self) -> None:
        """(Re)start the windows after the last one the Boss took; older ones are dropped."""
        self._restart(self.source)

    def _restart(self, source) -> None:
        state = self.stream.restart()
        try:
            source.restart(state, self.annealing, reported_before=self.stream.next_seq,
                           accept_all_from=self.accept_all_from)
        except AssistantDied as err:
            self._on_failure(err)

    def start_annealing(self) -> None:
        """Accept every pair from now on (InfoBatch's annealing; the Assistant goes on
        learning). Windows already made are dropped, batches already taken are kept."""
        if self.annealing:
            return
        self.annealing = True
        logger.info("AutoAssist annealing: every pair is accepted from here to the end")
        self.restart_stream()

    def next_window(self):
        """The next window of the stream (called by :meth:`BatchStream.next_batch`)."""
        start = time.perf_counter()
        try:
            while True:
                source = self.source  # read once: a fallback replaces it whole
                try:
                    return source.next_window()
                except AssistantDied as err:
                    self._on_failure(err)
        finally:
            self.wait_seconds += time.perf_counter() - start

    def check(self) -> None:
        """Called at every training step: a dead Assistant is noticed within a second, even
        while the Boss still trains on windows it received before the death."""
        now = time.monotonic()
        if self.source is None or now < self._next_check:
            return
        self._next_check = now + LIVENESS_INTERVAL
        try:
            self.source.check()
        except AssistantDied as err:
            self._on_failure(err)

    def state(self) -> dict:
        """``{"assistant": state, "stats": {...}}`` of the source; once the Assistant is gone
        (the uniform fallback), its last state the Boss holds (None values if it has none)."""
        source = self.source
        if source is not None and source.learns:
            try:
                self._last_state = source.state()
                return self._last_state
            except AssistantDied as err:
                self._on_failure(err)
        return self._last_state or {"assistant": None, "stats": None}

    def send_losses(self, ids, losses, seq: int) -> None:
        """Per-sentence losses of trained batch *seq* (never blocks)."""
        if self.source is not None:
            self.source.send_losses(ids, losses, seq)

    @property
    def dropped_losses(self) -> int:
        """Loss messages that never reached an Assistant, over the run (cumulative)."""
        with self._failure_lock:  # a fallback moves the failed source's count
            source = self.source
            return self._dropped_before + (source.dropped_losses if source is not None else 0)

    # -- failures -------------------------------------------------------------------------
    def _on_failure(self, err: AssistantDied) -> None:
        """Fall back to uniform batches; with ``--assistant-fallback error`` also stop the
        run: at once on one worker, at the next update on every rank of many."""
        with self._failure_lock:
            if self.fell_back:
                return
            if self.fallback != "uniform" and self.num_shards == 1:
                raise AssistantDied(f"{err}\n{_capitalised(FALLBACK_HINT)}") from None
            if self.fallback != "uniform":
                self.failure = str(err)
                logger.error(f"{err}\nevery worker stops after this update ({FALLBACK_HINT})")
            else:
                logger.warning(f"{err}\n--assistant-fallback uniform: continuing this run on "
                               "uniform batches (no pair is skipped from now on); "
                               f"{self._kept_state()}")
            failed, uniform = self.source, LocalSource(self.generator)
            # ready before it is published: a loader thread sees the old source or this one
            self._restart(uniform)
            if failed is not None:
                self._dropped_before += failed.dropped_losses
            self.source, self.fell_back = uniform, True
            if failed is not None:
                failed.shutdown()

    def _kept_state(self) -> str:
        """What the checkpoints keep of the failed Assistant, for the fallback's log line."""
        stats = (self._last_state or {}).get("stats")
        if not stats:
            return ("the checkpoints hold no Assistant state (none was read before the "
                    "failure): a run resumed from them starts a new Assistant")
        return (f"the checkpoints keep the Assistant's last state the Boss read (after "
                f"{stats.get('loss_batches', 0)} loss batches): a run resumed from them "
                "starts its Assistant from that state and skips pairs again")

    def stop_on_failure(self, failures: Optional[List[Optional[str]]] = None) -> None:
        """Raise on every rank once any rank's Assistant failed (with fallback error).

        Args:
            failures (list, optional): every rank's failure (None where none), as the ranks
                exchanged them; without them (one worker), this rank's own.
        """
        failed = [(r, f) for r, f in enumerate(failures or []) if f]
        if len(failed) == 1:
            where, cause = f"the Assistant of worker {failed[0][0]}", failed[0][1]
        elif failed:
            where = "the Assistants of workers " + ", ".join(str(r) for r, _ in failed)
            cause = "; ".join(f"worker {r}: {f}" for r, f in failed)
        else:
            where = "an Assistant process"
            cause = self.failure or "on another worker (its log has the cause)"
        raise AssistantDied(f"{where} failed, so every worker stops at this update: "
                            f"{cause}\n{_capitalised(FALLBACK_HINT)}")

    def shutdown(self) -> None:
        if self.source is not None:
            self.source.shutdown()


def _capitalised(text: str) -> str:
    return text[0].upper() + text[1:]


def describe_settings_change(saved: Optional[dict], now: Optional[dict],
                             planned: int) -> Optional[str]:
    """A warning naming the Assistant's flags that a resume changed (``Assistant.settings``
    of the saved state and of this run's), and from when their new values apply: the
    *planned* batches were drawn under the saved values and are trained as saved (that keeps
    the resume exact); the windows after them are scored under this run's."""
    if not saved or not now or saved == now:
        return None
    changes = []
    if saved.get("lambda_max") != now.get("lambda_max"):
        changes.append(f"--assistant-lambda-max changed from {saved.get('lambda_max')} to "
                       f"{now.get('lambda_max')} (the ceiling of lambda_k, and the floor "
                       f"1 - lambda_max of every pair's acceptance probability)")

    def checks(value):
        return "off" if value is None else f"on ({value} pairs flagged, accepted at the floor)"

    if saved.get("pair_checks") != now.get("pair_checks"):
        changes.append(f"the pair checks changed from {checks(saved.get('pair_checks'))} to "
                       f"{checks(now.get('pair_checks'))} (--assistant-pair-checks, or the "
                       "feature file's checks)")
    return (f"at this resume {'; '.join(changes)}: the {planned} batches already planned were "
            "drawn under the saved run's values and are trained as saved, so that the resume "
            "stays exact; this run's values apply from the first window after them, "
            f"{planned} batches from here. To apply them at once, resume with "
            "--reset-dataloader, which starts a new Assistant and batch plan")
