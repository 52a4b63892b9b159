"""fairseq's batching flags are honoured or refused with the reason, and data-pass numbers
are used where a data pass is meant (not fairseq's epoch, a batch count)."""

import numpy as np
import pytest

from autoassist_fairseq.data.batch_generator import BatchGenerator
from autoassist_fairseq.tasks.batch_iterator import AutoAssistEpochBatchIterator
from autoassist_fairseq.diagnose import data_pass
from task_helpers import fairseq_task


@pytest.fixture(scope="module")
def task(tiny_data):
    task = fairseq_task(tiny_data)
    task.load_dataset("train")
    return task


@pytest.mark.parametrize("flag", ["skip_remainder_batch", "grouped_shuffling",
                                  "update_epoch_batch_itr"])
def test_batching_flags_that_cannot_hold_are_refused_with_the_reason(task, flag):
    # as fairseq's Trainer.get_train_iterator calls it
    kwargs = {"update_epoch_batch_itr": False, flag: True}
    with pytest.raises(ValueError, match="--" + flag.replace("_", "-")) as err:
        task.get_batch_iterator(task.dataset("train"), max_tokens=600, **kwargs)
    assert "drop it" in str(err.value)
    assert task.train_iterator is None  # refused before any Assistant started


def test_the_train_subset_outside_training_gets_fairseqs_iterator(task):
    """--valid-subset train and fairseq-generate --gen-subset train ask for the train
    subset in fairseq's order (next_epoch_itr(shuffle=False)): they get fairseq's own
    iterator, and no Assistant starts."""
    itr = task.get_batch_iterator(task.dataset("train"), max_tokens=600,
                                  skip_remainder_batch=False)
    assert not isinstance(itr, AutoAssistEpochBatchIterator)
    pairs = sum(len(batch["id"]) for batch in itr.next_epoch_itr(shuffle=False))
    assert pairs == len(task.dataset("train"))
    assert task.train_iterator is None


def _iterator(start=None):
    sizes = np.arange(100) % 20 + 3
    gen = BatchGenerator(np.arange(100), sizes, sizes, max_tokens=100, window_size=30)
    return AutoAssistEpochBatchIterator(list(range(100)), None, gen, start)


def test_an_update_freq_that_varies_by_epoch_is_refused():
    """One --update-freq value (several equal ones too) plans batches and save points; a
    list that varies by epoch is refused before any data, naming the flag."""
    from autoassist_fairseq.tasks.config import check_config
    from task_helpers import task_config

    check_config(task_config("--update-freq", "2"))
    check_config(task_config("--update-freq", "2,2"))
    with pytest.raises(ValueError, match="--update-freq 1,2 varies by epoch.*give one value"):
        check_config(task_config("--update-freq", "1,2"))


def test_curriculum_is_refused_with_the_other_flags():
    """fairseq asks for an unshuffled epoch for each epoch of --curriculum: refused where
    every flag is, before any data is read."""
    from autoassist_fairseq.tasks.config import check_config
    from task_helpers import task_config

    check_config(task_config("--curriculum", "0"))
    with pytest.raises(ValueError, match="--curriculum 2 asks for the first epochs in "
                                         "fairseq's length order.*drop --curriculum"):
        check_config(task_config("--curriculum", "2"))


def test_an_epoch_counts_the_batches_of_the_pass_it_is_in():
    itr = _iterator()
    asked = []
    itr.generator.pass_batch_count = lambda data_pass: asked.append(data_pass) or 10
    itr.epoch, itr.stream.gen_state = 3, {"data_pass": 2}  # fairseq epoch 3 runs in pass 2
    itr._agree_num_batches()
    assert asked == [2]


def test_diagnose_reads_the_rate_of_the_pass_the_run_was_in():
    saved = {"ranks": [{"stream": {"generator": {"data_pass": 2}}}]}
    assert data_pass(saved, {"epoch": 3}) == 2
    assert data_pass({"ranks": [{"stream": None}]}, {"epoch": 3}) == 3  # no stream saved
