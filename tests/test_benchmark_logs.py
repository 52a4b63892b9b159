"""research/bench/logs.py on fairseq's own log lines: JSON (what every research run logs)
and the simple format (the runs started before), one file holding both after a resume.

The train.log files under fixtures/logs are real runs (fixtures/logs/make_logs.py: the same
command in each format, and resumed from simple into JSON); the long epochs are written by
fairseq's own progress bars, as fairseq-train writes them."""

import io
import logging
from collections import OrderedDict
from pathlib import Path

import pytest

from autoassist_fairseq.metrics import AVERAGED
from research.bench import flags, logs

FIXTURES = Path(__file__).parent / "fixtures" / "logs"
# figures of time, which two runs of one command do not repeat, and the JSON-only "update"
TIMES = ("wps", "ups", "wall", "train_wall", "aa_wait_s", "update")
# the Assistant's state as its process reports it (accuracy, chance, threshold, lambda,
# unlearnable share; logged once it has learned): two runs of one command differ in it, and
# a run of another --max-update (the mixed log's first segment) in the update it first
# appears at too
ASSISTANT_STATE = tuple(AVERAGED.values())


def fixture(arm, fmt):
    text = (FIXTURES / f"{arm}-{fmt}.log").read_text()
    return text, logs.parse_log(text)


def by_key(records, drop=TIMES + ASSISTANT_STATE):
    return {(r["tag"], r["epoch"], r["num_updates"]): {k: v for k, v in r.items()
                                                        if k not in drop}
            for r in records}


@pytest.mark.parametrize("arm", ["baseline", "autoassist"])
def test_a_run_logged_in_json_gives_the_records_of_the_simple_format(arm):
    text, json_records = fixture(arm, "json")
    _, simple_records = fixture(arm, "simple")
    lines = [line for line in text.splitlines() if "| train_inner |" in line or
             "| train |" in line or "| valid |" in line]
    assert lines and all(line.endswith("}") for line in lines)  # fairseq's JSON lines
    assert len(json_records) == len(lines)
    assert by_key(json_records) == by_key(simple_records)
    inner = [r for r in json_records if r["tag"] == "train_inner"]
    assert {5, 10, 40} <= {r["num_updates"] for r in inner}
    assert all(r["epoch_updates"] > 0 and 0 < r["update"] - (r["epoch"] - 1) <= 1
               for r in inner)
    # fairseq's prefixed keys of train and valid: wall and train_wall apart
    train = [r for r in json_records if r["tag"] == "train"]
    assert all(r["wall"] >= r["train_wall"] and "train_loss" not in r for r in train)
    valid = [r for r in json_records if r["tag"] == "valid"]
    assert {r["best_loss"] for r in valid if "best_loss" in r} <= {r["loss"] for r in valid}
    assert any("best_loss" in r for r in valid)
    # the curve (every valid line, the Boss tokens of the train line before it)
    curves = [logs.build_curve(records, lambda e, u, t: (t.get("aa_boss_tok"), None))
              for records in (json_records, simple_records)]
    assert [{k: v for k, v in p.items() if k != "wall"} for p in curves[0]] == \
        [{k: v for k, v in p.items() if k != "wall"} for p in curves[1]]
    assert [p["updates"] for p in curves[0]][-1] == 40
    if arm == "autoassist":
        assert all(p["boss_tokens"] > 0 for p in curves[0])
    # 40 updates: 3 whole epochs of 12 (the baseline) and 4 of the last epoch's 12; the
    # AutoAssist arm's epochs are 14, 12 and 13 updates, then 1 of 11
    expected = 3 + 4 / 12 if arm == "baseline" else 3 + 1 / 11
    assert logs.epochs_trained(json_records) == logs.epochs_trained(simple_records) == expected


@pytest.mark.parametrize("arm", ["baseline", "autoassist"])
def test_a_simple_format_log_resumed_in_json_is_read_whole(arm):
    """The run trained to update 25 in the simple format, then resumed to 40 in JSON: one
    train.log, two segments."""
    text, records = fixture(arm, "mixed")
    first, second = text.split(logs.HEADER)[1:]
    assert "--log-format simple" in first.splitlines()[0]
    assert "--log-format json" in second.splitlines()[0]
    assert "| train_inner | epoch 001:" in first and "| train_inner | {" in second
    _, whole = fixture(arm, "simple")
    got, want = by_key(records), by_key(whole)
    # the first run's stop at update 25 (in epoch 3 of the baseline, 2 of the AutoAssist
    # arm) adds a train and a valid line
    stop = 3 if arm == "baseline" else 2
    assert set(got) - set(want) == {("train", stop, 25), ("valid", stop, 25)}
    assert set(want) <= set(got)
    for key, fields in want.items():
        assert set(got[key]) == set(fields), key
        if key[2] <= 25:  # before the resume: the same run's lines
            assert got[key] == fields, key
        if key[0] == "train_inner":  # JSON's after the resume, the simple format's before
            assert got[key]["epoch_updates"] == fields["epoch_updates"], key
    # the resumed segment's walls go on from the wall of the update it resumed from
    # (fairseq's clock starts again at 0 there)
    stopped = [r["wall"] for r in records if r["tag"] == "train" and r["num_updates"] == 25]
    resumed = [r["wall"] for r in records if r["num_updates"] > 25 and "wall" in r]
    assert stopped[0] > 0 and resumed and min(resumed) >= stopped[0]
    assert logs.epochs_trained(records) == logs.epochs_trained(whole)


def fairseq_log(log_format, epochs, interval):
    """A train.log's lines as fairseq-train writes them, by fairseq's own progress bars
    (fairseq_cli/train.py's logger format): *epochs* [(its updates, updates trained)]; a
    train_inner line every *interval* updates, a train and a valid line at each epoch's
    end."""
    from fairseq.logging import progress_bar

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(asctime)s | %(levelname)s | %(name)s | "
                                           "%(message)s"))
    logger = progress_bar.logger
    logger.addHandler(handler)
    level, propagate = logger.level, logger.propagate
    logger.setLevel(logging.INFO)
    logger.propagate = False
    updates = 0
    try:
        for epoch, (size, trained) in enumerate(epochs, 1):
            bar = progress_bar.progress_bar(range(size), log_format=log_format,
                                            log_interval=interval, epoch=epoch)
            for i, _ in enumerate(bar):
                if i == trained:
                    break
                updates += 1
                stats = OrderedDict(loss=7 - updates / 1e4, num_updates=updates,
                                    train_wall=updates / 9, wall=updates / 7)
                bar.log(stats, tag="train_inner", step=updates)
            stats["loss"] = 6.5
            bar.print(stats, tag="train", step=updates)
            valid = progress_bar.progress_bar(range(1), log_format=log_format, epoch=epoch,
                                              prefix="valid on 'valid' subset")
            valid.print(OrderedDict(loss=6 - epoch / 10, num_updates=updates,
                                    best_loss=6 - epoch / 10), tag="valid", step=updates)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate
    return logs.HEADER + "python -m fairseq_cli.train x\n" + stream.getvalue()


@pytest.mark.parametrize("epochs, interval", [
    ([(447, 447), (4473, 4473), (4473, 4473)], 50),  # long epochs, run to their ends
    ([(447, 447), (4999, 4999)], 50),  # its lines fit 4996 to 5000; its train line: 4999
    ([(120, 120), (130, 75)], 50),  # a partial last epoch of another length
    ([(447, 447), (4473, 4473), (4473, 2980)], 50),  # the last epoch's lines fit one N
    ([(447, 447), (4473, 4473), (4473, 130)], 50),  # ... fit 4407 to 4561: the smallest read
    ([(12, 12), (11, 11), (11, 7)], 5),
])
def test_fairseq_json_lines_give_the_simple_formats_records(epochs, interval):
    simple = logs.parse_log(fairseq_log("simple", epochs, interval))
    json_records = logs.parse_log(fairseq_log("json", epochs, interval))
    assert json_records and all(r["tag"] in ("train_inner", "train", "valid")
                                for r in json_records)
    assert len(json_records) == len(simple)
    whole = {e for e, (size, trained) in enumerate(epochs, 1) if trained == size}
    for got, want in zip(json_records, simple):
        assert (got["tag"], got["epoch"]) == (want["tag"], want["epoch"])
        assert {k: v for k, v in got.items() if k not in ("update", "epoch_updates")} == \
            {k: v for k, v in want.items() if k != "epoch_updates"}
        if got["epoch"] in whole and got["tag"] == "train_inner":
            assert got["epoch_updates"] == want["epoch_updates"] == epochs[got["epoch"] - 1][0]
    trained, read = logs.epochs_trained(json_records), logs.epochs_trained(simple)
    if len(whole) == len(epochs):
        assert trained == read == len(epochs)
    else:  # at most 0.001 * D / d of an epoch on (D the updates of the last epoch, d those
        # at its last train_inner line)
        size, done = epochs[-1]
        start = sum(t for _, t in epochs[:-1])
        last_line = (start + done) // interval * interval - start
        assert read == len(epochs) - 1 + done / size
        assert read <= trained <= read + 0.001 * done / last_line
    if epochs[-1] == (4473, 130):
        assert trained == 2 + 130 / 4407 != read


def test_lines_that_are_not_records_are_skipped():
    assert logs.parse_line("2026 | INFO | fairseq_cli.train | {'_name': None}") is None
    assert logs.parse_line("2026 | INFO | train | {not json}") is None
    assert logs.parse_line("2026 | INFO | valid | [1, 2]") is None
    tag, epoch, fields = logs.parse_line(
        '2026 | INFO | valid | {"epoch": 2, "valid_loss": "5.1", "valid_bleu": [1, 2], '
        '"valid_num_updates": "30", "valid_best_loss": 5.0, "valid_note": "x"}')
    assert (tag, epoch, fields) == ("valid", 2, {"loss": 5.1, "num_updates": 30.0,
                                                 "best_loss": 5.0})


def test_every_run_logs_json_and_a_finished_simple_format_run_is_the_same_command(tmp_path):
    args = flags.build_run_args(["--max-epoch", "2", "--log-format", "tqdm"], "baseline", 1,
                                tmp_path, [], [], [])
    assert flags.get_flag(args, "--log-format") == "json" and args.count("--log-format") == 1
    older = [("simple" if a == "json" else a) for a in args]
    assert older != args and flags.same_command(args, older)
    assert not flags.same_command(args, older + ["--log-interval", "10"])
