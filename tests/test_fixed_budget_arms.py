"""The fixed-budget arms that train plain fairseq on a filtered corpus: plain-opusfilter
(OpusFilter's heuristic set) and two-stage (train briefly, filter by the training dynamics,
train on)."""

import json
import os
import sys

import numpy as np
import pytest

import warm
from utils import REPO

from research import fixed_budget
from research.bench import BenchmarkError, filtered_data
from research.bench.budgets import baseline_tokens_at
from research.bench.flags import get_flag
from research.bench.logs import parse_log
from test_fixed_budget import CONFIG, _ctx


def test_two_stage_pays_its_scoring_passes_out_of_its_budget(tmp_path):
    ctx = dict(_ctx(tmp_path), pass_updates=30, two_stage_passes=2, data=tmp_path)
    two_stage = fixed_budget.arm_args("two-stage", 0.7, 1, ctx)
    # two forward passes over the corpus, a third of a training step each: 2/3 of 30 updates
    assert get_flag(two_stage, "--max-update") == str(70 - 20)
    assert get_flag(two_stage, "--task") == "translation"
    opus = fixed_budget.arm_args("plain-opusfilter", 0.7, 1, ctx)
    assert get_flag(opus, "--max-update") == "70" and get_flag(opus, "--task") == "translation"
    # a budget that ends within the first stage is refused before anything trains
    short = fixed_budget.arm_args("two-stage", 0.5, 1, ctx)  # 50 - 20 = 30 updates < 2 passes
    with pytest.raises(BenchmarkError, match="within the first stage's 2 passes"):
        fixed_budget.two_stage(0.5, 1, ctx, short, (np.ones((30, 2)), [1]))
    assert not (tmp_path / "two-stage-0.50B-s1").exists()


def test_two_stage_tokens_follow_fairseqs_shuffled_batches():
    rng = np.random.default_rng(0)
    counts = rng.integers(100, 200, size=(17, 2))
    # with no first stage, the count is plain fairseq's from update 0
    for epoch, updates in ((1, 5), (2, 17), (2, 30), (3, 40)):
        assert fixed_budget.two_stage_tokens(counts, 3, (1, 0, np.zeros(2)), epoch, updates) \
            == baseline_tokens_at(counts, [1], 3, epoch, updates)
    # after a first stage of 4 passes (40 updates) the second stage's batches add to it
    before = np.array([1000.0, 1200.0])
    got = fixed_budget.two_stage_tokens(counts, 3, (5, 40, before), 6, 40 + 17 + 2)
    tokens, _ = baseline_tokens_at(counts, [1], 3, 6, 5 * 17 + 2)  # epoch 6's first 2 batches
    epochs_1_to_5 = int(counts.sum(axis=0)[0]) * 5
    assert got[0] == 1000 + int(counts.sum(axis=0)[0]) + tokens - epochs_1_to_5


def test_raw_training_text_is_each_binarised_pairs_own_line(synthetic_data):
    import sentencepiece as spm
    from fairseq.data import Dictionary

    from autoassist_fairseq.features.prepared import open_training_sides

    src, tgt, sources, targets = filtered_data.raw_training_text(synthetic_data)
    sides = open_training_sides(synthetic_data, src, tgt)
    assert len(sources) == len(targets) == len(sides[tgt])
    vocab = Dictionary.load(str(synthetic_data / f"dict.{tgt}.txt"))
    model = spm.SentencePieceProcessor(
        model_file=str(next((synthetic_data / "spm").glob("*.model"))))
    for i in range(0, len(targets), 7):
        pieces = vocab.string(sides[tgt][i]).split()
        assert model.decode_pieces(pieces) == targets[i].strip(), i


def test_the_opusfilter_corpus_holds_the_pairs_no_heuristic_rejects(synthetic_data, tmp_path,
                                                                   monkeypatch):
    from autoassist_fairseq.features.prepared import open_training_sides
    from autoassist_fairseq.tools import opusfilter_heuristics

    src, tgt, sources, _ = filtered_data.raw_training_text(synthetic_data)
    n = len(sources)
    rejects = {"A": np.arange(n) % 5 == 0, "B": np.arange(n) % 7 == 0}
    monkeypatch.setattr(opusfilter_heuristics, "heuristic_flags", lambda *a: rejects)
    out = filtered_data.opusfilter_data(synthetic_data, tmp_path / "opus")
    keep = np.flatnonzero(~(rejects["A"] | rejects["B"]))
    kept = open_training_sides(out, src, tgt)[tgt]
    whole = open_training_sides(synthetic_data, src, tgt)[tgt]
    assert len(kept) == len(keep)
    assert all((kept[j] == whole[int(i)]).all() for j, i in enumerate(keep))
    assert (out / "done").read_text().startswith(f"{n - len(keep)} of {n} pairs flagged")
    # written once: a second call reuses it without running the filters
    monkeypatch.setattr(opusfilter_heuristics, "heuristic_flags", None)
    assert filtered_data.opusfilter_data(synthetic_data, tmp_path / "opus") == out


def test_a_tiny_two_stage_run_filters_by_its_dynamics_and_continues(tiny_data, tmp_path):
    config = tmp_path / "tiny.args"
    config.write_text(" ".join(CONFIG) + "\n")
    cmd = [sys.executable, "-m", "research.fixed_budget", "--data", tiny_data,
           "--config", config, "--corpus", "tiny", "--work", tmp_path / "work",
           "--budget-epochs", "4", "--arms", "two-stage@1.0", "--two-stage-passes", "2",
           "--skip-bleu", "--results", tmp_path / "results"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = warm.run(cmd, capture_output=True, text=True, timeout=400, env=env, cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run = tmp_path / "work" / "tiny" / "two-stage-1.00B-s1-rex"  # the default schedule
    passes = [int(line.split("(")[1].split()[0]) for line in proc.stdout.splitlines()
              if line.startswith("B = ")][0]
    stage1 = (run / "stage1" / "train.log").read_text()
    assert max(r["num_updates"] for r in parse_log(stage1) if r["tag"] == "train") == \
        2 * passes and "--max-epoch 2" in stage1
    assert {p.name for p in (run / "losses").iterdir()} == {
        "losses.checkpoint1.npz", "losses.checkpoint2.npz"}
    flagged = int((run / "filtered-data" / "done").read_text().split()[0])
    assert flagged > 0  # tiny_data's random targets
    stage2 = (run / "train.log").read_text()
    assert "--continue-once" in stage2 and str(run / "filtered-data") in stage2
    assert "loaded checkpoint" in stage2.lower() and "checkpoint2.pt" in stage2
    row, = json.loads((tmp_path / "results" / "summary.json").read_text())
    # the scoring passes count in the share: the updates trained plus 2/3 of a pass
    assert row["updates"] == 4 * passes - round(2 * passes / 3)
    assert row["budget_share"] == 1.0
    assert row["boss_tokens"] > 0


def test_filter_kinds_gives_the_share_of_each_kind_a_filter_dropped(tmp_path):
    """research.filter_kinds: per noise kind, the share of its prepared pairs missing from
    the filtered corpus (raw lines through train.kept-lines)."""
    import json

    from research import filter_kinds

    labels = tmp_path / "train.labels"
    labels.write_text("clean\ncopy\nclean\ncopy\ncopy\nclean\n")
    data, filtered = tmp_path / "data", tmp_path / "filtered"
    for folder, lines in ((data, [0, 1, 2, 3, 5]), (filtered, [0, 2, 3])):
        folder.mkdir()
        (folder / "train.kept-lines").write_text("".join(f"{i}\n" for i in lines))
    out = tmp_path / "kinds.json"
    filter_kinds.main(["--labels", str(labels), "--data", str(data), str(filtered),
                       "--out", str(out)])
    shares = json.loads(out.read_text())[str(filtered)]
    # line 4 (a copy) was dropped by the preparation: it counts in neither
    assert shares == {"clean": {"pairs": 3, "dropped": round(1 / 3, 4)},
                      "copy": {"pairs": 2, "dropped": 0.5}}
