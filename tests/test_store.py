import json
import shutil

import numpy as np
import pytest
import scipy.sparse as sp
from fairseq.data import Dictionary, data_utils

from autoassist_fairseq.features.store import FeatureStore, feature_prefix
from utils import run


def _prefix(data):
    return feature_prefix(str(data), "train", "src", "tgt")


def test_rows_follow_dataset_indices(tiny_data):
    store = FeatureStore.open(_prefix(tiny_data))
    d = Dictionary.load(str(tiny_data / "dict.src.txt"))
    src = data_utils.load_indexed_dataset(str(tiny_data / "train.src-tgt.src"), d)
    tgt = data_utils.load_indexed_dataset(str(tiny_data / "train.src-tgt.tgt"), d)
    assert store.num_rows == len(src) == 600
    assert store.dim == 2 * len(d)
    for i in (0, 123, 599):
        row = store.rows(np.array([i]))
        cols = set(row.indices.tolist())
        want = {t for t in src[i].tolist() if t != d.eos()}
        want |= {len(d) + t for t in tgt[i].tolist() if t != d.eos()}
        assert cols == want
        assert np.isclose(np.linalg.norm(row.data), 1.0)


def test_rows_gathers_any_order(tiny_data):
    store = FeatureStore.open(_prefix(tiny_data))
    ids = np.array([5, 3, 5, 599, 0])
    block = store.rows(ids).toarray()
    for k, i in enumerate(ids):
        np.testing.assert_array_equal(block[k], store.rows(np.array([i])).toarray()[0])


def test_missing_file_names_the_command(tmp_path):
    with pytest.raises(FileNotFoundError, match="autoassist-features DATA"):
        FeatureStore.open(str(tmp_path / "x"), rebuild_hint="autoassist-features DATA")


def test_mismatch_and_truncation_are_detected(tiny_data, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(tiny_data, copy)
    prefix = _prefix(copy)
    with pytest.raises(ValueError, match="rows but the dataset has 601"):
        FeatureStore.open(prefix, num_rows=601, rebuild_hint="CMD")
    with pytest.raises(ValueError, match="fingerprint differs.*rebuild it with: CMD"):
        FeatureStore.open(prefix, fingerprint="0" * 64, rebuild_hint="CMD")
    data = np.load(prefix + ".data.npy")
    np.save(prefix + ".data.npy", data[:-5])
    with pytest.raises(ValueError, match="truncated"):
        FeatureStore.open(prefix)
    with open(prefix + ".data.npy", "r+b") as f:
        f.truncate(100)
    with pytest.raises(ValueError, match="empty or truncated"):
        FeatureStore.open(prefix)


def test_cli_errors_name_the_fix(tiny_data):
    proc = run(["autoassist-features", tiny_data, "-s", "src", "-t", "xx"], check=False)
    assert proc.returncode != 0
    assert f"dictionary not found: {tiny_data}/dict.xx.txt; check --source-lang/--target-lang " \
        "against the files fairseq-preprocess wrote" in proc.stdout + proc.stderr
    proc = run(["autoassist-features", tiny_data, "-s", "src", "-t", "tgt", "--split", "test"],
               check=False)
    assert proc.returncode != 0
    assert f"Dataset not found: test.src-tgt.src in {tiny_data} (files for split 'test': " \
        "none). Check --source-lang/--target-lang/--split, or binarise the data first with " \
        f"fairseq-preprocess --source-lang src --target-lang tgt --destdir {tiny_data}" \
        in proc.stdout + proc.stderr


def test_header_records_fingerprint(tiny_data):
    meta = json.load(open(_prefix(tiny_data) + ".json"))
    assert meta["num_rows"] == 600 and len(meta["fingerprint"]) == 64


def test_a_rebuild_leaves_an_open_store_reading_its_own_file(tmp_path):
    """A training run maps the feature file while autoassist-features rebuilds it (say with
    other pair checks): its rows stay those it opened, where a rewrite in place would change
    them under it, or end it with SIGBUS while the file is cut."""
    prefix = str(tmp_path / "f")
    first = sp.random(50, 30, density=0.2, format="csr", random_state=0, dtype=np.float32)
    FeatureStore.save(prefix, first, {"fingerprint": "a"})
    store = FeatureStore.open(prefix)
    FeatureStore.save(prefix, 2 * first + sp.eye(50, 30, format="csr"), {"fingerprint": "b"})
    np.testing.assert_array_equal(store.rows(np.arange(50)).toarray(), first.toarray())
    assert FeatureStore.open(prefix).meta["fingerprint"] == "b"
    assert not list(tmp_path.glob("*.tmp"))
