"""research.history_ranking: the skipped share of a later checkpoint's reducible loss when
pairs are ranked by their earlier loss."""

import json

import numpy as np
import pytest

from research.history_ranking import history_rows, main


def _save(path, losses, ntok, floor, ids=None):
    extra = {} if ids is None else {"ids": ids}
    np.savez(path, losses=losses, ntok=ntok, floor=np.float64(floor), **extra)


def test_a_kept_ranking_reaches_the_oracle_and_a_reversed_one_does_not(tmp_path):
    rng = np.random.default_rng(0)
    n = 400
    ntok = rng.integers(5, 20, n).astype(float)
    before = 1.0 + rng.gamma(2.0, 1.0, n)
    later = 1.0 + 0.5 * (before - 1.0)  # every pair learned by half: the same ranking
    _save(tmp_path / "a.npz", before, ntok, 1.0)
    # the later file stored in another id order: rows are matched by id
    perm = rng.permutation(n)
    _save(tmp_path / "b.npz", later[perm], ntok[perm], 1.0, ids=perm)
    _save(tmp_path / "c.npz", 1.0 + (before.max() - before), ntok, 1.0)  # ranking reversed
    rows = history_rows([str(tmp_path / f) for f in ("a.npz", "b.npz", "c.npz")], 0.35)
    kept, reversed_ = rows
    assert kept["spearman_reducible"] == pytest.approx(1.0)
    assert kept["history_skipped_share_reducible"] == pytest.approx(
        kept["oracle_skipped_share_reducible"])
    assert kept["oracle_skipped_share_reducible"] < 0.35  # the easiest pairs hold less
    assert reversed_["spearman_reducible"] == pytest.approx(-1.0)
    assert reversed_["history_skipped_share_reducible"] > 0.35 > \
        reversed_["oracle_skipped_share_reducible"]


def test_writes_json_and_refuses_other_pairs(tmp_path, capsys):
    ntok = np.full(10, 4.0)
    _save(tmp_path / "a.npz", np.linspace(1, 3, 10), ntok, 0.5)
    _save(tmp_path / "b.npz", np.linspace(1, 2, 10), ntok, 0.5)
    main(["--losses", str(tmp_path / "a.npz"), str(tmp_path / "b.npz"),
          "--out", str(tmp_path / "r.json")])
    assert len(json.loads((tmp_path / "r.json").read_text())["rows"]) == 1
    _save(tmp_path / "c.npz", np.linspace(1, 2, 9), ntok[:9], 0.5)
    with pytest.raises(SystemExit, match="different pairs"):
        main(["--losses", str(tmp_path / "a.npz"), str(tmp_path / "c.npz")])
