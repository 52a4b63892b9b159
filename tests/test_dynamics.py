"""diagnose.dynamics: a high loss that does not fall, relative to pairs of the same length,
flagged at a bar set from the corpus; and autoassist-filter --dynamics / --scores-out."""

import csv
import shutil

import numpy as np
import pytest

from autoassist_fairseq.diagnose.dynamics import (BAR, dynamics_flags, dynamics_scores,
                                                  length_z, pair_dynamics, robust_z)
from autoassist_fairseq.tools.filter import cli_main
from autoassist_fairseq.features.store import FeatureStore


def _learning_corpus(n=4000, noisy=40, seed=0):
    """Losses of a corpus whose pairs fall from about 6 to about 3 nats, longer targets higher;
    the first *noisy* pairs stay high."""
    rng = np.random.default_rng(seed)
    ntok = rng.integers(3, 60, size=n)
    base = 0.02 * ntok  # long targets have a higher loss, noise or not
    first = 6.0 + base + rng.normal(0, 0.3, n)
    last = 3.0 + base + rng.normal(0, 0.3, n)
    last[:noisy] = first[:noisy] - rng.uniform(0, 0.3, noisy)
    return first, last, ntok


def test_pairs_whose_loss_does_not_fall_score_highest_and_are_flagged():
    first, last, ntok = _learning_corpus()
    scores = dynamics_scores(first, last, ntok)
    noisy = np.arange(len(first)) < 40
    assert scores["dynamics"][noisy].min() > np.quantile(scores["dynamics"][~noisy], 0.99)
    flags = dynamics_flags(scores["dynamics"])
    assert flags[noisy].mean() == 1.0
    assert flags[~noisy].mean() <= 0.01  # the corpus's own spread sets the bar


def test_a_long_target_is_compared_with_long_targets():
    """Loss grows with length and most targets are short, as in a corpus: without noise, the
    long pairs are not flagged for their length."""
    rng = np.random.default_rng(1)
    ntok = (3 + rng.exponential(12, size=5000)).astype(int)
    last = 0.05 * ntok + rng.normal(0, 0.2, 5000)
    z = length_z(last, ntok)
    long = ntok > 60
    assert long.sum() > 20 and abs(np.median(z[long])) < 0.5 and (z > BAR).mean() < 0.01
    assert (robust_z(last)[long] > BAR).mean() > 0.9  # one bar for all would flag them


def test_a_clean_corpus_has_few_pairs_over_the_bar():
    rng = np.random.default_rng(2)
    score = rng.normal(size=100_000)
    assert (robust_z(score) > BAR).mean() < 0.002
    assert not dynamics_flags(np.full(50, 3.0)).any()  # no spread: nothing stands out


def _losses(path, losses, ntok, ids=None):
    ids = np.arange(len(losses)) if ids is None else ids
    np.savez(path, losses=losses, ntok=ntok, floor=1.2, ids=ids)
    return str(path)


def test_losses_of_other_pairs_or_another_file_are_refused(tmp_path):
    first, last, ntok = _learning_corpus(n=200, noisy=0)
    a = _losses(tmp_path / "a.npz", first, ntok)
    b = _losses(tmp_path / "b.npz", last[:100], ntok[:100], ids=np.arange(0, 200, 2))
    with pytest.raises(ValueError, match=r"b.npz holds the losses of 100 pairs, the corpus "
                                         r"has 200: .*no --sample-pairs"):
        pair_dynamics(a, b, 200)
    text = tmp_path / "scores.tsv"
    text.write_text("pair\tline\n")
    with pytest.raises(ValueError, match="scores.tsv is not an .npz file: give the losses "
                                         "that autoassist-diagnose --losses-out wrote"):
        pair_dynamics(a, str(text), 200)
    other = tmp_path / "other.npz"
    np.savez(other, x=np.zeros(3))
    with pytest.raises(ValueError, match=r"other.npz holds \['x'\], not the losses"):
        pair_dynamics(a, str(other), 200)


def test_filter_drops_the_pairs_the_dynamics_flag_and_writes_every_score(tiny_data, tmp_path,
                                                                         capsys):
    from fairseq.data import indexed_dataset

    data = tmp_path / "data"
    shutil.copytree(tiny_data, data)
    checks = FeatureStore.open(str(data / "train.src-tgt.autoassist")).suspect_pairs()
    n = len(checks)
    src = indexed_dataset.make_dataset(str(data / "train.src-tgt.tgt"), impl="mmap")
    ntok = np.array([len(src[i]) for i in range(n)])
    first, last, _ = _learning_corpus(n=n, noisy=0, seed=3)
    stuck = np.flatnonzero(~checks)[:5]  # pairs the checks let through
    last[stuck] = first[stuck]
    a, b = _losses(tmp_path / "a.npz", first, ntok), _losses(tmp_path / "b.npz", last, ntok)
    # the late checkpoint's Assistant's P(accept), as autoassist-diagnose --losses-out saves it
    accept = np.random.default_rng(0).uniform(0.1, 1.0, size=n)
    np.savez(b, **dict(np.load(b)), accept=accept)
    (data / "train.kept-lines").write_text("".join(f"{i + 1}\n" for i in range(n)))
    scores_out, out = tmp_path / "scores.tsv", tmp_path / "filtered"
    assert cli_main([str(data), "--out", str(out), "--dynamics", a, b,
                     "--scores-out", str(scores_out)]) == 0
    with open(scores_out, newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    assert len(rows) == n and [int(r["line"]) for r in rows] == list(range(1, n + 1))
    dyn = np.array([int(r["dynamics_flag"]) for r in rows], dtype=bool)
    dropped = np.array([int(r["dropped"]) for r in rows], dtype=bool)
    assert dyn[stuck].all() and dyn.mean() < 0.05
    assert np.array_equal(np.array([int(r["checks_flag"]) for r in rows], dtype=bool), checks)
    assert np.array_equal(dropped, checks | dyn)
    assert float(rows[stuck[0]]["loss_last"]) == pytest.approx(last[stuck[0]], rel=1e-4)
    assert [float(r["p_accept"]) for r in rows] == pytest.approx(accept, rel=1e-4)
    kept = indexed_dataset.make_dataset(str(out / "train.src-tgt.src"), impl="mmap")
    assert len(kept) == n - dropped.sum()
    assert "flagged by the pair checks and the training dynamics" in capsys.readouterr().out
    # the scores alone: no corpus written, the same rows
    alone = tmp_path / "alone.tsv.gz"
    assert cli_main([str(data), "--scores-out", str(alone)]) == 0
    assert "would keep" in capsys.readouterr().out and alone.exists()
    assert cli_main([str(data)]) == 1
    assert "give --out (the filtered corpus) or --scores-out" in capsys.readouterr().err
    # a folder as --scores-out, or a path under a file: refused before any work
    assert cli_main([str(data), "--scores-out", str(tmp_path)]) == 1
    assert f"--scores-out {tmp_path} is a folder" in capsys.readouterr().err
    assert cli_main([str(data), "--scores-out", str(scores_out / "x.tsv")]) == 1
    assert f"{scores_out} is not a folder this user can write" in capsys.readouterr().err


def test_visits_keep_each_pairs_first_and_latest_loss_and_merge_over_ranks():
    from autoassist_fairseq.assistant.visits import PairVisits, merge_states

    a, b = PairVisits(6), PairVisits(6)
    a.observe(np.array([0, 1, 1]), np.array([5.0, 9.0, 6.0]), data_pass=1)  # 1 twice: last
    b.observe(np.array([2, 0]), np.array([4.0, 3.0]), data_pass=2)
    a.observe(np.array([2]), np.array([2.5]), data_pass=3)
    assert a.visits.tolist() == [1, 1, 1, 0, 0, 0]
    assert float(a.first[1]) == 6.0 and float(a.first[2]) == 2.5
    merged = merge_states([a.state_dict(), None, b.state_dict()])
    assert merged.visits.tolist() == [2, 1, 2, 0, 0, 0]
    assert merged.first[[0, 2]].tolist() == [5.0, 4.0]  # pass 1 on a, pass 2 on b
    assert merged.last[[0, 2]].tolist() == [3.0, 2.5]  # pass 2 on b, pass 3 on a
    assert merged.sum[[0, 2]].tolist() == [8.0, 6.5]
    assert np.isnan(merged.first[3]) and merged.first_pass[3] == 0
    again = PairVisits(6)
    again.load_state_dict(merged.state_dict())
    for f in ("first", "last", "sum", "visits", "first_pass", "last_pass"):
        assert np.array_equal(getattr(again, f), getattr(merged, f), equal_nan=True), f
    with pytest.raises(ValueError, match="saved visits cover 6 pairs but the dataset has 7"):
        PairVisits(7).load_state_dict(merged.state_dict())
    with pytest.raises(ValueError, match="no rank's state holds the pairs' visits"):
        merge_states([None])


def _checkpoint_with_visits(path, first, last, visits):
    import torch

    from autoassist_fairseq.assistant.visits import PairVisits
    from autoassist_fairseq.data.arrays import arrays_to_tensors

    rec = PairVisits(len(first))
    for k in range(int(visits.max())):
        pick = np.flatnonzero(visits > k)
        rec.observe(pick, first[pick] if k == 0 else last[pick], data_pass=k + 1)
    ranks = [{"assistant": {"visits": rec.state_dict()}}]
    torch.save({"extra_state": {"train_iterator": {"autoassist": arrays_to_tensors(
        {"ranks": ranks})}}}, path)
    return str(path)


def test_filter_scores_the_dynamics_of_the_training_passes_from_a_checkpoint(tiny_data,
                                                                             tmp_path, capsys):
    import torch
    from fairseq.data import indexed_dataset

    data = tmp_path / "data"
    shutil.copytree(tiny_data, data)
    checks = FeatureStore.open(str(data / "train.src-tgt.autoassist")).suspect_pairs()
    n = len(checks)
    tgt = indexed_dataset.make_dataset(str(data / "train.src-tgt.tgt"), impl="mmap")
    first, last, _ = _learning_corpus(n=n, noisy=0, seed=4)
    stuck = np.flatnonzero(~checks)[:4]
    last[stuck] = first[stuck]
    visits = np.full(n, 3)
    visits[stuck[-1]] = 1  # seen once: no dynamics to score
    ckpt = _checkpoint_with_visits(tmp_path / "checkpoint3.pt", first, last, visits)
    scores = tmp_path / "scores.tsv"
    assert cli_main([str(data), "--dynamics-checkpoint", ckpt, "--scores-out",
                     str(scores)]) == 0
    with open(scores, newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    dyn = np.array([int(r["dynamics_flag"]) for r in rows], dtype=bool)
    assert dyn[stuck[:-1]].all() and not dyn[stuck[-1]] and dyn.mean() < 0.05
    assert rows[stuck[-1]]["dynamics_score"] == ""
    assert int(rows[0]["target_tokens"]) == len(tgt[0])
    # a checkpoint whose Assistant recorded no visits, and both sources at once
    plain = tmp_path / "plain.pt"
    torch.save({"extra_state": {}}, plain)
    assert cli_main([str(data), "--dynamics-checkpoint", str(plain), "--scores-out",
                     str(scores)]) == 1
    err = capsys.readouterr().err
    assert "no rank's state holds the pairs' visits" in err and str(plain) in err
    assert cli_main([str(data), "--dynamics-checkpoint", ckpt, "--dynamics", ckpt, ckpt,
                     "--scores-out", str(scores)]) == 1
    assert "not both" in capsys.readouterr().err
