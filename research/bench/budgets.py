"""The baseline's batches, Boss tokens and updates, from fairseq's own batching of the
train set: the budget every other arm gets, and the validations spread over it."""

import math

from . import BenchmarkError
from .flags import get_flag, infer_langs


def baseline_batches(data, tokens, seed):
    """Per-batch (non-padding, padded) src+tgt tokens of fairseq's translation batching
    for this run, in fairseq's (unshuffled) batch order; also the update frequency."""
    import numpy as np
    from fairseq.data import Dictionary, LanguagePairDataset, data_utils

    src, tgt = infer_langs(data, tokens)
    prefix = f"{data}/{get_flag(tokens, '--train-subset', default='train')}.{src}-{tgt}."
    dicts = [Dictionary.load(f"{data}/dict.{lang}.txt") for lang in (src, tgt)]
    s = data_utils.load_indexed_dataset(prefix + src, dicts[0])
    t = data_utils.load_indexed_dataset(prefix + tgt, dicts[1])
    if s is None or t is None:
        raise BenchmarkError(f"no binarised train set {prefix}{{{src},{tgt}}} in {data}")
    dataset = LanguagePairDataset(s, s.sizes, dicts[0], t, t.sizes, dicts[1])
    max_tokens = get_flag(tokens, "--max-tokens")
    batch_size = get_flag(tokens, "--batch-size", "--max-sentences")
    # as the trainer's resolve_max_positions(task, model, max_tokens), model limits assumed >=
    limit = int(max_tokens) if max_tokens else math.inf
    max_pos = (min(int(get_flag(tokens, "--max-source-positions", default=1024)), limit),
               min(int(get_flag(tokens, "--max-target-positions", default=1024)), limit))
    with data_utils.numpy_seed(seed):
        indices = dataset.ordered_indices()
    indices, _ = dataset.filter_indices_by_size(indices, max_pos)
    batches = dataset.batch_by_size(
        indices, max_tokens=int(max_tokens) if max_tokens else None,
        max_sentences=int(batch_size) if batch_size else None,
        required_batch_size_multiple=int(get_flag(tokens, "--required-batch-size-multiple",
                                                  default=8)))
    counts = np.array([(s.sizes[b].sum() + t.sizes[b].sum(),
                        len(b) * (s.sizes[b].max() + t.sizes[b].max())) for b in batches])
    update_freq = [int(x) for x in str(get_flag(tokens, "--update-freq", default=1)).split(",")]
    return counts, update_freq


def epoch_updates(counts, update_freq, epoch):
    """The baseline's updates in *epoch*: its batches over that epoch's --update-freq (a list
    whose last value holds for later epochs, as fairseq's)."""
    return math.ceil(len(counts) / update_freq[min(epoch, len(update_freq)) - 1])


def baseline_tokens_at(counts, update_freq, seed, epoch, updates):
    """(non-padding, padded) Boss tokens of the baseline after *updates* updates, epoch
    *epoch*: full earlier epochs plus the first batches of this epoch in fairseq's
    shuffled order (EpochBatchIterator shuffles the fixed batches with seed + epoch)."""
    import numpy as np
    from fairseq.data import data_utils

    done = sum(epoch_updates(counts, update_freq, e) for e in range(1, epoch))
    n = min(len(counts), max(0, updates - done) * update_freq[min(epoch, len(update_freq)) - 1])
    order = list(range(len(counts)))
    with data_utils.numpy_seed(seed + epoch):
        np.random.shuffle(order)
    partial = counts[order[:n]].sum(axis=0) if n else np.zeros(2)
    total = counts.sum(axis=0) * (epoch - 1) + partial
    return int(total[0]), int(total[1])



def updates_for_tokens(counts, update_freq, tokens):
    """Baseline updates that train about *tokens* Boss tokens (its mean tokens per update
    of an epoch; at least 1)."""
    per_epoch = epoch_updates(counts, update_freq, 1)
    return max(1, round(tokens / (counts[:, 0].sum() / per_epoch)))


def budget_updates(counts, update_freq, tokens):
    """The baseline's updates under *tokens* (its run arguments): --max-update, else
    --max-epoch full epochs of fairseq's batches; None without either."""
    if (max_update := get_flag(tokens, "--max-update")) is not None and int(max_update) > 0:
        return int(max_update)
    if (max_epoch := get_flag(tokens, "--max-epoch")) is None:
        return None
    return sum(epoch_updates(counts, update_freq, e) for e in range(1, int(max_epoch) + 1))


def validation_flags(tokens, updates, validations, checkpoints=False):
    """--validate-interval-updates for about *validations* validations over *updates*: with
    a validation only at epoch ends, a 2-epoch budget has 2 points and every figure between
    them is a straight line. A multiple of --log-interval, so each validation's Boss tokens
    are read from the train_inner line of its own update. With *checkpoints* (test BLEU
    wanted), also --save-interval-updates at the same step: fairseq then saves
    checkpoint_E_U.pt at every such validation, and BLEU is scored there too, not only at
    epoch ends. [] when 0, or when the config or --extra-args sets an interval."""
    if not validations or not updates or get_flag(tokens,
                                                  "--validate-interval-updates") is not None:
        return []
    log_interval = int(get_flag(tokens, "--log-interval", default=100))
    step = str(math.ceil(math.ceil(updates / validations) / log_interval) * log_interval)
    flags = ["--validate-interval-updates", step]
    if checkpoints and get_flag(tokens, "--save-interval-updates") is None:
        flags += ["--save-interval-updates", step]
    return flags

