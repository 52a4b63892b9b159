"""``fairseq-train --tensorboard-logdir`` writes the AutoAssist metrics (``aa_*``) as
tensorboard scalars, next to fairseq's own (needs ``pip install .[tensorboard]``)."""

import importlib.util

import pytest

from utils import make_binarized, run, train_args

_MISSING = [name for name in ("tensorboard", "tensorboardX")
            if importlib.util.find_spec(name) is None]
pytestmark = pytest.mark.skipif(
    bool(_MISSING), reason=f"{', '.join(_MISSING)} not installed: pip install .[tensorboard]")


def scalars(logdir):
    """{tag: [(step, value), ...]} of the scalars of a tensorboard run directory."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(logdir), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def epoch_records(output):
    """The fields of fairseq's per-epoch lines (``| train | epoch 001 | loss 7.2 | ...``)."""
    records = []
    for line in output.splitlines():
        if "| train | epoch" in line:
            fields = (part.split(" ", 1) for part in line.split("| train | ", 1)[1].split(" | "))
            records.append({key: float(value) for key, value in fields})
    return records


def test_aa_metrics_reach_tensorboard(tmp_path):
    data = make_binarized(tmp_path, n_train=400, n_valid=40)
    logdir = tmp_path / "tb"
    proc = run(train_args(data, tmp_path / "ckpt", extra=[
        "--max-epoch", "2", "--log-interval", "5", "--tensorboard-logdir", str(logdir)]))
    out = proc.stdout + proc.stderr
    assert "tensorboard not found" not in out and "Please install tensorboardX" not in out

    # fairseq writes one run per log tag: per-interval (train_inner), per-epoch (train), valid
    assert (logdir / "train_inner").is_dir() and (logdir / "train").is_dir()
    epoch = scalars(logdir / "train")
    aa_tags = {tag for tag in epoch if tag.startswith("aa_")}
    assert {"aa_boss_tok", "aa_skip_tok", "aa_accept_tok", "aa_accept_sent"} <= aa_tags, sorted(epoch)
    assert "loss" in epoch  # fairseq's own metrics in the same run

    # the same values as the epoch lines of the text log, at the same update numbers
    records = epoch_records(out)
    assert len(records) == 2 == len(epoch["aa_boss_tok"])
    for (step, value), record in zip(epoch["aa_boss_tok"], records):
        assert step == int(record["num_updates"])
        assert value == pytest.approx(record["aa_boss_tok"], rel=1e-6)
    assert 0.0 <= epoch["aa_accept_tok"][-1][1] <= 1.0
    assert epoch["aa_boss_tok"][1][1] > epoch["aa_boss_tok"][0][1] > 0  # cumulative

    inner = scalars(logdir / "train_inner")
    assert any(tag.startswith("aa_") for tag in inner)
