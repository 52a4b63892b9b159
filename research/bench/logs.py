"""fairseq's train.log: its records across resumes, one curve point per validation and the
epochs trained; and the Assistant's per-pass acceptance, read from the run's pass log (the
JSON-lines records of ``--assistant-pass-log``).

Every run the harness starts logs in fairseq's JSON format (``flags.FORCED``): each record
is a line ``TIME | INFO | TAG | {...}`` (fairseq_cli/train.py's log format, the tag from
``rename_logger``), read as JSON. ``train_inner`` (JsonProgressBar.log) holds fairseq's
keys plus ``epoch`` and ``update`` (the epoch's fractional progress); ``train`` and
``valid`` (JsonProgressBar.print) hold fairseq's keys prefixed ``train_``/``valid_``, plus
``epoch``. The text of fairseq's simple format (``| train | epoch 001 | loss 5.9 | ...``,
``| train_inner | epoch 002:  3 / 47 loss=5.9, ...``) is read only for the runs started
before, whose logs are kept in docs/results and in work folders: a resumed run appends to
its train.log after a :data:`HEADER` line, so one file may hold segments of both formats.
Both give the same records, but for what only one format shows: a JSON train_inner
record's ``update``, from which its ``epoch_updates`` (the simple format's "i / N") is
derived (:func:`add_epoch_updates`)."""

import json
import math
import re
from pathlib import Path

from . import BenchmarkError

# the line run_training writes before each (re)start of fairseq-train: the command it ran
HEADER = "==== benchmark.py run: "
# an Assistant run's pass log, beside its train.log: one JSON record per finished data pass
# of each rank (``--assistant-pass-log``)
PASS_LOG = "passes.jsonl"
# the batch stream's line at the end of each data pass (rank 0's shard): read only for the
# passes of runs started before the pass log existed, whose logs are kept in docs/results
PASS_LINE = re.compile(r"AutoAssist data pass (\d+) \(shard 0\): accepted ([\d.]+) of its tokens")
TAGS = "train|valid|train_inner"
JSON_LINE = re.compile(rf"\| ({TAGS}) \| (\{{.*\}})\s*$")
SIMPLE_LINE = re.compile(rf"\| ({TAGS}) \| epoch (\d+)(.*)$")
# JsonProgressBar's "update": round(epoch - 1 + done / N, UPDATE_DECIMALS), done the
# epoch's updates so far (fairseq's i + 1) and N its updates in all
UPDATE_DECIMALS = 3


def read_passes(path):
    """{data pass: token acceptance} of shard 0 from a pass log (a pass recorded again
    after a resume: the later record); {} where there is no such file."""
    path = Path(path)
    if not path.exists():
        return {}
    passes = {}
    for line in path.read_text().splitlines():
        if line.strip():
            record = json.loads(line)
            if record["shard"] == 0:
                passes[int(record["data_pass"])] = float(record["token_rate"])
    return passes


def parse_line(line):
    """(tag, epoch, fields) of a fairseq log line, JSON or simple format, or None: fields
    by fairseq's unprefixed names, the numeric ones as floats. A simple-format train_inner
    line's "i / N" progress gives ``epoch_updates`` (N); a JSON one's fractional epoch is
    ``update``, from which :func:`parse_log` derives ``epoch_updates``."""
    if m := JSON_LINE.search(line):
        return _json_record(m.group(1), m.group(2))
    m = SIMPLE_LINE.search(line)
    if not m:
        return None
    rest, fields = m.group(3), {}
    if progress := re.match(r":\s*\d+ / (\d+) ", rest):  # train_inner: "epoch 002:  3 / 47"
        fields["epoch_updates"] = float(progress.group(1))
    pairs = re.findall(r"(\w+)=([^,\s]+)", rest) or [
        tuple(seg.split(" ", 1)) for seg in rest.split(" | ") if " " in seg.strip()]
    for key, value in pairs:
        if (number := _number(value)) is not None:
            fields[key.strip()] = number
    return m.group(1), int(m.group(2)), fields


def _number(value):
    """*value* as a float, or None: JsonProgressBar writes fairseq's figures as strings
    ("{:g}", "{:.3f}") and its own as numbers; a list (a tensor) or text is not one."""
    if isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _json_record(tag, text):
    """(tag, epoch, fields) of the JSON object of a train_inner/train/valid line, or None."""
    try:
        stats = json.loads(text)
    except ValueError:
        return None
    if not isinstance(stats, dict) or _number(stats.get("epoch")) is None:
        return None
    epoch = int(stats.pop("epoch"))
    prefix = "" if tag == "train_inner" else tag + "_"  # print() prefixes every key but epoch
    fields = {}
    for key, value in stats.items():
        if (number := _number(value)) is not None:
            fields[key[len(prefix):] if key.startswith(prefix) else key] = number
    return tag, epoch, fields


def parse_log(text):
    """Records {tag, epoch, **fields} of a train.log, each of its segments (one per
    :data:`HEADER`) in either format. A resumed run restarts fairseq's wall clock: its
    walls are continued from the wall of the checkpoint it resumed from (the interrupted
    partial epoch's time is not counted). Later duplicates win."""
    records = {}
    for segment in text.split(HEADER):
        parsed = [p for p in map(parse_line, segment.splitlines()) if p and "num_updates" in p[2]]
        if not parsed:
            continue
        start = min(f["num_updates"] for _, _, f in parsed)
        earlier = [r for r in records.values() if r["tag"] == "train" and r["num_updates"] < start]
        offset = max(earlier, key=lambda r: r["num_updates"]).get("wall", 0.0) if earlier else 0.0
        for tag, epoch, fields in parsed:
            if "wall" in fields:
                fields["wall"] += offset
            records[(tag, epoch, fields["num_updates"])] = dict(fields, tag=tag, epoch=epoch)
    records = list(records.values())
    add_epoch_updates(records)
    return records


def add_epoch_updates(records):
    """Give each JSON train_inner record its epoch's number of updates, ``epoch_updates``,
    as the simple format's "i / N" gave it: the N that makes fairseq's ``update`` of every
    such record of the epoch, done its num_updates less the epoch's start (the previous
    epoch's train record). fairseq rounds ``update`` to 3 decimals, so several N may fit:
    the smallest one at least the updates the epoch trained is taken. An epoch that ran to
    its end is then read exactly (its N fits), and so is any epoch whose records admit one
    N; a partial last epoch that admits several is read as at most 0.001 * D / d of an
    epoch further on than the simple format's N gives (D its updates, d those at its last
    train_inner line). An epoch whose start is not in the log (lost at a resume) gets none
    (:func:`epochs_trained` counts it whole)."""
    ends = {r["epoch"]: r["num_updates"] for r in records if r["tag"] == "train"}
    inner = {}
    for r in records:
        if r["tag"] == "train_inner" and "update" in r and "epoch_updates" not in r:
            inner.setdefault(r["epoch"], []).append(r)
    for epoch, group in inner.items():
        start = 0.0 if epoch == 1 else ends.get(epoch - 1)
        if start is None:
            continue
        points = [(r["num_updates"] - start, r["update"]) for r in group]
        trained = max([done for done, _ in points] + [ends.get(epoch, start) - start])
        if (n := _epoch_length(epoch, points, trained)) is not None:
            for r in group:
                r["epoch_updates"] = float(n)


def _epoch_length(epoch, points, least):
    """The smallest N >= *least* with round(epoch - 1 + done / N, 3) == update for every
    (done, update) of *points*, as JsonProgressBar computes it; where no N gives them all
    (updates fp16 skipped after an overflow, which fairseq's progress counts and
    num_updates does not), the N of the most advanced point; None where no point bounds N
    (each below 0.0005 of the epoch)."""
    half = 0.5 * 10 ** -UPDATE_DECIMALS
    points = sorted(points, reverse=True)  # the most advanced point bounds N the closest
    lo, hi = max(1, math.ceil(least)), math.inf
    for done, update in points:
        share = update - (epoch - 1)
        lo = max(lo, math.floor(done / (share + half)))
        if share > half:
            hi = min(hi, math.ceil(done / (share - half)))
    if hi == math.inf:
        return None
    for n in range(lo, hi + 1):
        if all(round(epoch - 1 + done / n, UPDATE_DECIMALS) == update for done, update in points):
            return n
    done, update = max(points, key=lambda p: p[1])  # its share is above half: hi is finite
    return max(math.ceil(least), round(done / (update - (epoch - 1))))


def build_curve(records, tokens_fn):
    """One point per validation: epoch, updates, valid_loss, wall, boss_tokens and
    boss_padded_tokens; tokens_fn(epoch, updates, train_record) -> (tokens, padded)."""
    curve = []
    for v in sorted((r for r in records if r["tag"] == "valid"), key=lambda r: r["num_updates"]):
        same_epoch = [r for r in records if r["tag"] in ("train", "train_inner")
                      and r["epoch"] == v["epoch"] and r["num_updates"] <= v["num_updates"]]
        train = max(same_epoch, key=lambda r: (r["num_updates"], r["tag"] == "train"),
                    default={})
        tokens, padded = tokens_fn(v["epoch"], int(v["num_updates"]), train)
        curve.append({"epoch": v["epoch"], "updates": int(v["num_updates"]),
                      "valid_loss": v["loss"], "wall": train.get("wall"),
                      "boss_tokens": tokens, "boss_padded_tokens": padded})
    return curve


def epochs_trained(records):
    """Epochs a run trained, a last partial one (--max-update) as the share of its updates
    done: of its ``epoch_updates`` (fairseq's progress), else the longest epoch's updates."""
    ends = {r["epoch"]: r["num_updates"] for r in records if r["tag"] == "train"}
    if not ends:
        return 0.0
    last = max(ends)
    if last > 1 and last - 1 not in ends:  # its start is not in the log (lost at a resume)
        return float(last)
    lengths = [ends[e] - ends.get(e - 1, 0) for e in ends if e == 1 or e - 1 in ends]
    # the last epoch's own length (AutoAssist's epochs differ), else the longest epoch's
    own = [r["epoch_updates"] for r in records if "epoch_updates" in r and r["epoch"] == last]
    per_epoch = max(own or [r["epoch_updates"] for r in records if "epoch_updates" in r]
                    or lengths)
    done = ends[last] - ends.get(last - 1, 0)
    return last - 1 + min(1.0, done / per_epoch)


def random_rates(records, text="", passes=None):
    """The token acceptance of an Assistant arm per data pass, as --assistant-random-rates
    (each in (0, 1], 4 decimals; passes in order), from *passes* (:func:`read_passes` of
    its pass log). A pass the pass log lacks (a run started before it existed) is read
    from the train.log *text*'s "AutoAssist data pass" lines (a pass logged again after a
    resume: the later line). The random rule applies its rates per data pass, and a
    fairseq epoch spans two passes, so the per-epoch ``aa_accept_tok`` would run the
    control's first pass below the arm's; it serves only for runs with neither (older
    versions). The arm's last, unfinished pass has no record: the control goes on at the
    last finished pass's rate."""
    passes = {int(n): float(rate) for n, rate in PASS_LINE.findall(text)} | (passes or {})
    if passes:
        missing = sorted(set(range(1, max(passes) + 1)) - set(passes))
        if missing:
            raise BenchmarkError(f"the AutoAssist arm has no record of data pass(es) "
                                 f"{missing}: rerun that arm (delete its directory)")
        values = [passes[n] for n in sorted(passes)]
    else:
        epochs = sorted((r for r in records if r["tag"] == "train" and "aa_accept_tok" in r),
                        key=lambda r: r["num_updates"])
        if not epochs:
            raise BenchmarkError("the AutoAssist arm has neither a pass log, nor data pass "
                                 "lines or aa_accept_tok in its train.log: cannot set the "
                                 "random control's rates")
        values = [r["aa_accept_tok"] for r in epochs]
    return ",".join(f"{min(1.0, max(1e-4, v)):.4f}" for v in values)

