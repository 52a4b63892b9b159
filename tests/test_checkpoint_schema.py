"""One checkpoint schema: the layout of this release loads, anything else (a development
version's layout before 0.2.0 included) is refused at load, in the Boss, with the reason;
theta round-trips bit for bit. The tiny run: ``fixtures/checkpoints/make_state.py``."""

import copy
import functools
import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch



from autoassist_fairseq.assistant import Assistant, AssistantHParams
from autoassist_fairseq.transport.process import AssistantProcess
from autoassist_fairseq.data.batch_generator import BatchGenerator
from autoassist_fairseq.tasks.batch_iterator import AutoAssistEpochBatchIterator
from autoassist_fairseq.data.schema import VERSION, CheckpointSchemaError

FIXTURES = Path(__file__).parent / "fixtures" / "checkpoints"
_spec = importlib.util.spec_from_file_location("make_state", FIXTURES / "make_state.py")
make_state = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_state)


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


def _current_state(iterators):
    itr = iterators()
    epoch = itr.next_epoch_itr()
    rng = np.random.default_rng(0)
    for _ in range(6):
        sample = next(epoch)
        itr.hold_losses(sample["autoassist"], torch.from_numpy(rng.random(len(sample["id"])) * 5))
    return itr.state_dict()


@pytest.mark.parametrize("change, match", [
    (lambda a: a.update(schema=VERSION + 1), "newer release"),
    (lambda a: a.update(schema="1"), "schema '1'"),
    (lambda a: a.pop("schema"), "schema None"),
    (lambda a: a.update(version=a.pop("schema") + 5), "development version .* before 0.2.0"),
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


def test_a_save_holds_no_counters_beside_the_assistant_and_a_0_2_0_one_with_them_loads(
        iterators):
    """0.2.0 saved the Assistant's counters (``stats``) beside its state; a resume reads
    them from the state, so a save leaves them out and a 0.2.0 save still loads."""
    state = _current_state(iterators)
    rank = state["autoassist"]["ranks"][0]
    assert set(rank) == {"assistant", "stream"}
    old = copy.deepcopy(state)
    old["autoassist"]["ranks"][0]["stats"] = {"loss_batches": 6, "loss_msgs": 6}
    again = iterators()
    again.load_state_dict(old)
    again.next_epoch_itr()
    assert again.client.state()["stats"]["loss_batches"] == rank["assistant"]["schedule"][
        "num_batches"]
