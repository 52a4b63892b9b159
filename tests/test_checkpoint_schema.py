"""One checkpoint schema: every shipped layout loads (fixtures written by the old code, see
``fixtures/checkpoints/make_state.py``), anything else is refused at load, in the Boss,
with the reason; theta round-trips bit for bit."""

import copy
import functools
import importlib.util
import logging
from pathlib import Path

import numpy as np
import pytest
import torch

from types import SimpleNamespace

from fairseq import metrics

from autoassist_fairseq import metrics as aa_metrics
from autoassist_fairseq.assistant import Assistant, AssistantHParams
from autoassist_fairseq.tasks.autoassist_translation import AutoAssistTranslationTask
from autoassist_fairseq.transport.process import AssistantProcess
from autoassist_fairseq.data.batch_generator import BatchGenerator
from autoassist_fairseq.tasks.batch_iterator import AutoAssistEpochBatchIterator
from autoassist_fairseq.data.arrays import tensors_to_arrays
from autoassist_fairseq.data.schema import VERSION, CheckpointSchemaError

FIXTURES = Path(__file__).parent / "fixtures" / "checkpoints"
_spec = importlib.util.spec_from_file_location("make_state", FIXTURES / "make_state.py")
make_state = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_state)

# layouts that shipped, and the commit that wrote each fixture
SHIPPED = {"v1": "262d29f", "v3-gen4": "6063bc4", "v3-rate": "fe7ba69",
           "v3-totals": "a9e7582", "v3-pass-counts": "98a2b7d", "v5": "a78aa29"}


@pytest.fixture
def iterators():
    """Makes iterators over the fixtures' run with the real Assistant; shuts all down."""
    made = []

    def make(window=make_state.WINDOW):
        gen = functools.partial(BatchGenerator, np.arange(make_state.N), *make_state.sizes(),
                                max_tokens=make_state.MAX_TOKENS, window_size=window, seed=1)
        start = functools.partial(
            AssistantProcess, functools.partial(Assistant, make_state.TinyStore(),
                                                AssistantHParams(warmup=0)), gen)
        made.append(AutoAssistEpochBatchIterator(list(range(make_state.N)), make_state.collate,
                                                 gen(), start))
        return made[-1]

    yield make
    for itr in made:
        itr.shutdown()


def _load(name):
    return torch.load(FIXTURES / f"{name}.pt", weights_only=True)


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_every_shipped_layout_resumes_with_its_assistant(name, iterators, caplog):
    state = _load(name)
    saved = tensors_to_arrays(state["autoassist"])
    itr = iterators()
    with caplog.at_level(logging.INFO):
        itr.load_state_dict(state)
        epoch = itr.next_epoch_itr()
    assert epoch.n == saved["offset"] == 6 and len(epoch) == saved["num_batches"]
    rank = saved["ranks"][0]
    restored = itr.client.state()
    # the Assistant's state goes on where it was saved (layouts before 5 named its count
    # of loss batches "updates")
    assert restored["stats"]["loss_batches"] == rank["stats"].get("updates",
                                                                 rank["stats"].get("loss_batches"))
    np.testing.assert_array_equal(restored["assistant"]["model"]["theta"],
                                  rank["assistant"]["model"]["theta"])
    sample = next(epoch)
    first = sample["id"].tolist()
    if rank.get("stream") is not None:  # the saved batch plan goes on exactly
        assert first == rank["stream"]["pending"][0].tolist()
        assert sample["autoassist"]["seq"] == 6  # numbered after the 6 batches trained
    else:
        assert "comes from a fresh data pass" in caplog.text
    assert sum(1 for _ in epoch) == len(epoch) - 7


def test_a_plan_saved_mid_pass_in_length_order_windows_is_refused(iterators):
    """Generator state 3 (windows were slices of the length order; 0b9cf15): this version
    cannot finish that pass without repeating or skipping pairs, and says so at load."""
    with pytest.raises(CheckpointSchemaError, match="slices of the length order"):
        iterators().load_state_dict(_load("v3-gen3"))


def _current_state(iterators):
    itr = iterators()
    epoch = itr.next_epoch_itr()
    rng = np.random.default_rng(0)
    for _ in range(6):
        sample = next(epoch)
        itr.hold_losses(sample["autoassist"], torch.from_numpy(rng.random(len(sample["id"])) * 5))
    return itr.state_dict()


@pytest.mark.parametrize("change, match", [
    (lambda a: a.update(version=VERSION + 1), "newer release"),
    (lambda a: a.update(version=2), "version 2"),
    (lambda a: a.pop("version"), "version None"),
    (lambda a: a["ranks"][0]["stream"].update(made_up=1), r"unknown fields \['made_up'\]"),
    (lambda a: a["ranks"][0]["stream"]["generator"].pop("next_pair"), "missing fields"),
    (lambda a: a["ranks"][0].update(stream=[1]), "is a list, not a dict"),
    (lambda a: a["totals"].pop("boss_tokens"), r"run's totals .*missing fields"),
])
def test_unknown_states_are_refused_at_load_with_the_reason(change, match, iterators):
    state = _current_state(iterators)
    bad = copy.deepcopy(state)
    change(bad["autoassist"])
    with pytest.raises(CheckpointSchemaError, match=match) as err:
        iterators().load_state_dict(bad)
    assert "--reset-dataloader" in str(err.value)


def test_theta_round_trips_bit_for_bit(iterators):
    state = _current_state(iterators)
    theta = state["autoassist"]["ranks"][0]["assistant"]["model"]["theta"]
    assert theta.dtype == torch.float64 and theta.abs().sum() > 0
    again = iterators()
    again.load_state_dict(state)
    again.next_epoch_itr()
    restored = again.client.state()["assistant"]["model"]["theta"]
    assert restored.dtype == np.float64
    assert np.array_equal(restored, theta.numpy())


def test_a_v4_state_resumes_with_its_count_of_loss_batches_renamed(iterators, caplog):
    """Version 4 named the Assistant's count of loss batches ``updates`` in a rank's stats;
    it loads as version 5 and resumes the saved batch plan."""
    v4 = copy.deepcopy(_current_state(iterators))
    saved = v4["autoassist"]
    saved["version"] = 4
    stats = saved["ranks"][0]["stats"]
    stats["updates"] = stats.pop("loss_batches")
    itr = iterators()
    itr.load_state_dict(v4)
    loaded = itr._resume
    assert loaded["version"] == VERSION
    assert loaded["ranks"][0]["stats"]["loss_batches"] == stats["updates"] > 0
    assert "updates" not in loaded["ranks"][0]["stats"]
    with caplog.at_level(logging.INFO):
        epoch = itr.next_epoch_itr()
    assert f"after {stats['updates']} loss batches" in caplog.text
    assert next(epoch)["id"].tolist() == saved["ranks"][0]["stream"]["pending"][0].tolist()


def test_a_v5_state_resumes_with_the_run_totals_of_its_task_dict(iterators):
    """Schema 5 kept the run's totals in the task's checkpoint dict, which fairseq hands to
    the task after the iterator's state, and copies of rank 0's counts in the iterator's:
    the resumed run's totals go on from the task dict's, the copies are not counted again,
    and the next checkpoint holds the totals once, in the iterator's state."""
    state = _load("v5")
    copied = tensors_to_arrays(state["autoassist"])["totals"]  # rank 0's, as of the save
    task_dict = {"totals": {"boss_tokens": 5000.0, "boss_padded_tokens": 7000.0,
                            "considered_tokens": 2100.0, "accepted_tokens": 1800.0}}
    itr = iterators()
    itr.load_state_dict(state)
    AutoAssistTranslationTask.set_checkpoint_dict(SimpleNamespace(train_iterator=itr), task_dict)
    epoch = itr.next_epoch_itr()
    assert itr.run_totals == task_dict["totals"]
    sample = next(epoch)
    stats = itr.pop_log_stats()  # the first batch after the resume, not the saved counts again
    assert 0 < stats["considered_tokens"] < copied["considered_tokens"]
    stats["boss_tokens"] = sample["autoassist"]["tokens"]
    with metrics.aggregate():
        aa_metrics.reduce([aa_metrics.logging_output(stats, {})], itr.run_totals)
    assert itr.run_totals["considered_tokens"] == pytest.approx(2100 + stats["considered_tokens"])
    assert itr.run_totals["boss_tokens"] == 5000 + sample["autoassist"]["tokens"]
    saved = itr.state_dict()["autoassist"]
    assert saved["version"] == VERSION and saved["totals"] == itr.run_totals
    assert "wait_seconds" not in saved and "totals" not in saved["ranks"][0]["stream"]
    again = iterators()
    again.load_state_dict(itr.state_dict())
    assert again.run_totals == itr.run_totals
