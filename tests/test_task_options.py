"""--assistant-features and --assistant-anneal (by epochs) in one short run on tiny_data."""

import re

from utils import RANDOM_SKIP, read_trace, run, train_args


def test_features_at_a_custom_prefix_and_annealing_by_epochs(tiny_data, tmp_path):
    """The feature file is read from --assistant-features (the default place holds none).
    --assistant-anneal 0.5 of --max-epoch 4 accepts every pair from epoch floor(0.5 * 4) + 1
    = 3 on, while the random rule accepts 60% of every pass before it."""
    data, features = tmp_path / "data", tmp_path / "features"
    data.mkdir()
    features.mkdir()
    for path in tiny_data.iterdir():
        if path.name.startswith("train.src-tgt.autoassist."):  # elsewhere, under another name
            (features / path.name.replace("train.src-tgt.autoassist", "custom")).symlink_to(path)
        else:
            (data / path.name).symlink_to(path)
    trace = tmp_path / "trace"
    proc = run(train_args(data, tmp_path / "ckpt", extra=[
        "--max-epoch", "4", "--assistant-anneal", "0.5", "--assistant-features",
        features / "custom", "--assistant-trace-dir", trace, "--no-save", *RANDOM_SKIP]))
    out = proc.stdout + proc.stderr
    assert f"AutoAssist features: {features / 'custom'} (600 pairs" in out
    assert out.count("AutoAssist annealing: every pair is accepted") == 1
    passes = [float(share) for share in re.findall(
        r"AutoAssist data pass \d+ \(shard 0\): accepted [\d.]+ of its tokens, ([\d.]+) of its "
        r"pairs", out)]
    assert len(passes) >= 4 and passes[0] == 1.0 and 0.5 < passes[1] < 0.7, passes
    assert passes[-1] == 1.0, passes  # a pass begun after annealing: every pair
    epochs = {int(epoch): dict(re.findall(r"\| (aa_\w+) ([\d.]+)", line)) for epoch, line in
              re.findall(r"\| train \| epoch (\d+)(.*)", out)}
    assert sorted(epochs) == [1, 2, 3, 4]
    assert float(epochs[2]["aa_skip_tok"]) > 0
    # the last epoch skips nothing: the run's skipped tokens stay as they were
    assert float(epochs[4]["aa_accept_tok"]) == 1.0
    assert epochs[4]["aa_skip_tok"] == epochs[3]["aa_skip_tok"]
    # an annealed epoch is a whole pass from its first batch on: as many batches as the
    # first epoch (which accepted every pair too), not the skipping count of epoch 2
    per_epoch = {e: sum(1 for epoch, _, _ in read_trace(trace) if epoch == e) for e in epochs}
    assert per_epoch[2] < per_epoch[1], per_epoch
    assert per_epoch[3] >= per_epoch[1] - 1 and per_epoch[4] >= per_epoch[1] - 1, per_epoch
