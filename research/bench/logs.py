"""fairseq's simple-format train.log: its lines, its records across resumes, one curve
point per validation and the epochs trained; and the Assistant's per-pass acceptance, read
from the run's pass log (the JSON-lines records of ``--assistant-pass-log``)."""

import json
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
    """(tag, epoch, fields) of a fairseq simple-format log line, or None."""
    m = re.search(r"\| (train|valid|train_inner) \| epoch (\d+)(.*)$", line)
    if not m:
        return None
    rest, fields = m.group(3), {}
    if progress := re.match(r":\s*\d+ / (\d+) ", rest):  # train_inner: "epoch 002:  3 / 47"
        fields["epoch_updates"] = float(progress.group(1))
    pairs = re.findall(r"(\w+)=([^,\s]+)", rest) or [
        tuple(seg.split(" ", 1)) for seg in rest.split(" | ") if " " in seg.strip()]
    for key, value in pairs:
        try:
            fields[key.strip()] = float(value)
        except ValueError:
            pass
    return m.group(1), int(m.group(2)), fields


def parse_log(text):
    """Records {tag, epoch, **fields} of a train.log. A resumed run restarts fairseq's wall
    clock: its walls are continued from the wall of the checkpoint it resumed from (the
    interrupted partial epoch's time is not counted). Later duplicates win."""
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
    return list(records.values())


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
    done: from fairseq's "epoch E: i / N" progress, else the longest epoch's updates."""
    ends = {r["epoch"]: r["num_updates"] for r in records if r["tag"] == "train"}
    if not ends:
        return 0.0
    last = max(ends)
    lengths = [ends[e] - ends.get(e - 1, 0) for e in ends if e == 1 or e - 1 in ends]
    # the last epoch's own length (AutoAssist's epochs differ), else the longest epoch's
    own = [r["epoch_updates"] for r in records if "epoch_updates" in r and r["epoch"] == last]
    per_epoch = max(own or [r["epoch_updates"] for r in records if "epoch_updates" in r]
                    or lengths)
    if last == 1:
        done = ends[1]
    else:  # an epoch whose start is not in the log (lost at a resume) counts as full
        done = ends[last] - ends[last - 1] if last - 1 in ends else per_epoch
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

