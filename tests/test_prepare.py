"""scripts/prepare-corpus.sh and scripts/prepare-wmt14en2de.sh on real data (shared/)."""

import gzip
import json
import shutil
import time

import pytest

from scripts_helpers import SCRIPTS, SHARED_DATA, run

MULTI30K = SHARED_DATA / "multi30k-en-de"
WMT14 = SHARED_DATA / "wmt14-en-de-sample"


def need(path):
    if not path.exists():
        pytest.skip(f"shared data not found: {path} (expected next to the repository, in "
                    "../shared/data)")


def head_gz(src, dst, n, compress=False):
    with gzip.open(src, "rt", encoding="utf-8", newline="\n") as f:
        lines = [next(f) for _ in range(n)]
    opener = gzip.open if compress else open
    with opener(dst, "wt", encoding="utf-8", newline="\n") as f:
        f.writelines(lines)
    return lines


def dataset_len(prefix):
    from fairseq.data import indexed_dataset

    return len(indexed_dataset.MMapIndexedDataset(str(prefix)))


@pytest.fixture(scope="module")
def multi30k_slice(tmp_path_factory):
    """The first 2000 train / 200 valid / 200 test pairs of Multi30k (the en side gzipped)."""
    need(MULTI30K)
    raw = tmp_path_factory.mktemp("multi30k-raw")
    for lang in ("en", "de"):
        gz = lang == "en"
        suffix = ".gz" if gz else ""
        head_gz(MULTI30K / f"train.{lang}.gz", raw / f"train.{lang}{suffix}", 2000, gz)
        head_gz(MULTI30K / f"val.{lang}.gz", raw / f"val.{lang}{suffix}", 200, gz)
        head_gz(MULTI30K / f"test_2016_flickr.{lang}.gz", raw / f"test.{lang}", 200)
    return raw


def prepare_args(raw, out, **names):
    return [SCRIPTS / "prepare-corpus.sh", "--src", "en", "--tgt", "de",
            "--train", raw / names.get("train", "train"), "--valid", raw / names.get("valid", "val"),
            "--test", raw / names.get("test", "test"), "--out", out, "--bpe-size", "1000"]


@pytest.fixture(scope="module")
def prepared(multi30k_slice, tmp_path_factory):
    out = tmp_path_factory.mktemp("multi30k-data")
    start = time.perf_counter()
    proc = run(prepare_args(multi30k_slice, out))
    return out, proc, time.perf_counter() - start


def test_prepare_corpus_binarizes_and_builds_features(prepared, multi30k_slice):
    out, proc, _ = prepared
    for step in ("text/train", "bpe-train", "bpe-encode", "binarize", "features"):
        assert f"step {step}:" in proc.stdout
    assert (out / "spm" / "spm.model").exists()
    for split in ("train", "valid", "test"):
        for lang in ("en", "de"):
            assert (out / f"{split}.en-de.{lang}.bin").exists()
    n_train = dataset_len(out / "train.en-de.en")
    assert n_train == dataset_len(out / "train.en-de.de")
    header = json.loads((out / "train.en-de.autoassist.json").read_text())
    assert header["num_rows"] == n_train

    # cleaning: aligned pairs within 1-250 words and ratio 1.5; some of the 2000 dropped
    src = (out / "raw" / "train.en").read_text().splitlines()
    tgt = (out / "raw" / "train.de").read_text().splitlines()
    assert len(src) == len(tgt) == n_train and 1500 < n_train < 2000
    for s, t in zip(src, tgt):
        ns, nt = len(s.split()), len(t.split())
        assert 1 <= ns <= 250 and 1 <= nt <= 250 and ns <= 1.5 * nt and nt <= 1.5 * ns
    # valid/test: the raw references, unchanged
    assert (out / "raw" / "test.de").read_text() == (multi30k_slice / "test.de").read_text()
    assert dataset_len(out / "test.en-de.de") == 200
    with gzip.open(multi30k_slice / "val.en.gz", "rt", encoding="utf-8") as f:
        assert (out / "raw" / "valid.en").read_text() == f.read()


def test_prepare_corpus_rerun_reuses_finished_steps(prepared, multi30k_slice):
    out, _, first_seconds = prepared
    watched = [out / "train.en-de.en.bin", out / "spm" / "spm.model", out / "train.en-de.autoassist.json"]
    mtimes = [p.stat().st_mtime_ns for p in watched]
    start = time.perf_counter()
    proc = run(prepare_args(multi30k_slice, out))
    seconds = time.perf_counter() - start
    assert proc.stdout.count("reusing") == 7, proc.stdout  # 3 text steps + 4 later steps
    assert [p.stat().st_mtime_ns for p in watched] == mtimes
    assert seconds < first_seconds / 3

    # a changed valid set redoes what depends on it, and only that
    with open(multi30k_slice / "val.de", "a", encoding="utf-8") as f:
        f.write("Ein zusätzlicher Satz.\n")
    with gzip.open(multi30k_slice / "val.en.gz", "at", encoding="utf-8") as f:
        f.write("An extra sentence.\n")
    proc = run(prepare_args(multi30k_slice, out))
    assert "step text/valid: copying" in proc.stdout
    assert "step bpe-train: reusing" in proc.stdout and "step text/train: reusing" in proc.stdout
    assert "step binarize: fairseq-preprocess" in proc.stdout
    assert dataset_len(out / "valid.en-de.de") == 201
    assert json.loads((out / "train.en-de.autoassist.json").read_text())["num_rows"] == \
        dataset_len(out / "train.en-de.en")


def test_prepare_corpus_missing_file_is_named(multi30k_slice, tmp_path):
    proc = run(prepare_args(multi30k_slice, tmp_path / "out", test="no-such-test"), check=False)
    assert proc.returncode != 0
    assert f"{multi30k_slice / 'no-such-test'}.en" in proc.stderr


def test_prepare_corpus_line_count_mismatch_is_named(multi30k_slice, tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    shutil.copy(multi30k_slice / "test.en", raw / "bad.en")
    lines = (multi30k_slice / "test.de").read_text().splitlines(keepends=True)
    (raw / "bad.de").write_text("".join(lines[:150]))
    proc = run(prepare_args(multi30k_slice, tmp_path / "out", test=raw / "bad"), check=False)
    assert proc.returncode != 0
    assert "line-count mismatch" in proc.stderr
    assert str(raw / "bad.en") in proc.stderr and str(raw / "bad.de") in proc.stderr


def test_prepare_wmt14_offline_on_the_sample(tmp_path):
    need(WMT14)
    raw = tmp_path / "raw"
    raw.mkdir()
    for name in ("newstest2013-src.en", "newstest2013-ref.de", "newstest2014-deen-src.en",
                 "newstest2014-deen-ref.de"):
        with gzip.open(WMT14 / "sgm" / f"{name}.sgm.gz", "rb") as f:
            (raw / f"{name}.sgm").write_bytes(f.read())
    for lang in ("en", "de"):
        shutil.copy(WMT14 / "train-sample-tok" / f"train-sample.tok.{lang}.gz", raw)
    out = tmp_path / "data"
    proc = run([SCRIPTS / "prepare-wmt14en2de.sh", "--raw-dir", raw, "--out", out,
                "--bpe-size", "1000", "--no-download"], timeout=300)
    assert "using the train pair(s) found there" in proc.stdout
    assert "extracting" in proc.stdout and "(SGM)" in proc.stdout

    # references: the SGM extraction gives back the plain newstest files exactly
    for split, name in (("valid", "newstest2013"), ("test", "newstest2014")):
        for lang in ("en", "de"):
            with gzip.open(WMT14 / f"{name}.{lang}.gz", "rt", encoding="utf-8") as f:
                assert (out / "raw" / f"{split}.{lang}").read_text(encoding="utf-8") == f.read()
    assert dataset_len(out / "test.en-de.de") == 3003
    assert dataset_len(out / "valid.en-de.en") == 3000
    n_train = dataset_len(out / "train.en-de.en")
    assert 5000 < n_train < 10000  # line 5 (empty English side) and others cleaned away
    header = json.loads((out / "train.en-de.autoassist.json").read_text())
    assert header["num_rows"] == n_train

    # a second run, naming the same training files explicitly, reuses everything
    proc = run([SCRIPTS / "prepare-wmt14en2de.sh", "--raw-dir", raw, "--out", out,
                "--train-prefix", "train-sample.tok", "--bpe-size", "1000", "--no-download"],
               timeout=300)
    assert "fairseq-preprocess --joined" not in proc.stdout
    assert proc.stdout.count("reusing") == 10, proc.stdout  # 3 + 7 steps


def test_prepare_wmt14_offline_missing_files_are_listed(tmp_path):
    proc = run([SCRIPTS / "prepare-wmt14en2de.sh", "--raw-dir", tmp_path / "raw",
                "--out", tmp_path / "data", "--no-download"], check=False)
    assert proc.returncode != 0
    for name in ("europarl-v7.de-en.en", "commoncrawl.de-en.en", "news-commentary-v9.de-en.en",
                 "newstest2013-src.en.sgm", "newstest2014-deen-src.en.sgm"):
        assert name in proc.stderr
    assert str(tmp_path / "raw") in proc.stderr
