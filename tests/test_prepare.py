"""scripts/prepare-corpus.sh and scripts/prepare-wmt14en2de.sh on real data (shared/),
and the training-data filters (scripts/clean_corpus.py) on a corpus whose two languages
are segmented differently, as English and pre-segmented Japanese are."""

import gzip
import json
import random
import shutil
import sys

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


def read_lines(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", newline="\n") as f:
        return [line.rstrip("\n") for line in f]


def assert_kept_lines_map(out, raw_src, raw_tgt, src, tgt, n_train):
    """OUT/train.kept-lines: pair j of the binarised training set is line kept[j] of the
    raw --train input (its encoding is exactly the j-th encoded training line)."""
    import sentencepiece as spm

    kept = [int(x) for x in (out / "train.kept-lines").read_text().split()]
    assert len(kept) == n_train and kept == sorted(set(kept))
    sp = spm.SentencePieceProcessor(model_file=str(out / "spm" / "spm.model"))
    for raw, lang in ((raw_src, src), (raw_tgt, tgt)):
        lines = read_lines(raw)
        encoded = (out / "spm" / f"train.{lang}").read_text(encoding="utf-8").splitlines()
        assert len(encoded) == n_train
        pieces = sp.encode([" ".join(lines[k].split()) for k in kept], out_type=str)
        assert [" ".join(p) for p in pieces] == encoded
    return kept


def prepare_args(raw, out, **names):
    return [SCRIPTS / "prepare-corpus.sh", "--src", "en", "--tgt", "de",
            "--train", raw / names.get("train", "train"), "--valid", raw / names.get("valid", "val"),
            "--test", raw / names.get("test", "test"), "--out", out, "--bpe-size", "1000"]


@pytest.fixture(scope="module")
def prepared(multi30k_slice, tmp_path_factory):
    out = tmp_path_factory.mktemp("multi30k-data")
    return out, run(prepare_args(multi30k_slice, out))


def test_prepare_corpus_binarizes_and_builds_features(prepared, multi30k_slice):
    out, proc = prepared
    for step in ("text/train", "bpe-train", "bpe-encode", "piece-filter", "binarize", "features"):
        assert f"step {step}:" in proc.stdout
    assert (out / "spm" / "spm.model").exists()
    for split in ("train", "valid", "test"):
        for lang in ("en", "de"):
            assert (out / f"{split}.en-de.{lang}.bin").exists()
    n_train = dataset_len(out / "train.en-de.en")
    assert n_train == dataset_len(out / "train.en-de.de")
    header = json.loads((out / "train.en-de.autoassist.json").read_text())
    assert header["num_rows"] == n_train

    # cleaning: aligned pairs of 1-250 pieces, piece ratio within 1.5 (and 2 pieces) of the
    # median (about 1 for en-de); some of the 2000 dropped
    src = (out / "spm" / "train.en").read_text().splitlines()
    tgt = (out / "spm" / "train.de").read_text().splitlines()
    assert len(src) == len(tgt) == n_train and 1500 < n_train < 2000
    ratios = sorted(len(s.split()) / len(t.split()) for s, t in zip(src, tgt))
    center = ratios[len(ratios) // 2]
    assert 0.8 < center < 1.25
    for s, t in zip(src, tgt):
        ns, nt = len(s.split()), len(t.split())
        assert 1 <= ns <= 250 and 1 <= nt <= 250
        assert ns <= 1.5 * 1.05 * center * nt + 2 and center * nt <= 1.5 * 1.05 * ns + 2
    assert_kept_lines_map(out, multi30k_slice / "train.en.gz", multi30k_slice / "train.de",
                          "en", "de", n_train)
    # valid/test: the raw references, unchanged
    assert (out / "raw" / "test.de").read_text() == (multi30k_slice / "test.de").read_text()
    assert dataset_len(out / "test.en-de.de") == 200
    with gzip.open(multi30k_slice / "val.en.gz", "rt", encoding="utf-8") as f:
        assert (out / "raw" / "valid.en").read_text() == f.read()


def test_prepare_corpus_rerun_reuses_finished_steps(prepared, multi30k_slice):
    out, _ = prepared
    watched = [out / "train.en-de.en.bin", out / "spm" / "spm.model", out / "train.en-de.autoassist.json"]
    mtimes = [p.stat().st_mtime_ns for p in watched]
    proc = run(prepare_args(multi30k_slice, out))
    # every step reused (not timed: a rerun's speed depends on the machine's load)
    assert proc.stdout.count("reusing") == 8, proc.stdout  # 3 text steps + 5 later steps
    assert [p.stat().st_mtime_ns for p in watched] == mtimes

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
    assert proc.stdout.count("reusing") == 11, proc.stdout  # 3 + 8 steps


def test_prepare_wmt14_offline_missing_files_are_listed(tmp_path):
    proc = run([SCRIPTS / "prepare-wmt14en2de.sh", "--raw-dir", tmp_path / "raw",
                "--out", tmp_path / "data", "--no-download"], check=False)
    assert proc.returncode != 0
    for name in ("europarl-v7.de-en.en", "commoncrawl.de-en.en", "news-commentary-v9.de-en.en",
                 "newstest2013-src.en.sgm", "newstest2014-deen-src.en.sgm"):
        assert name in proc.stderr
    assert str(tmp_path / "raw") in proc.stderr


# -- a language pair segmented differently -------------------------------------------------
ENGLISH_WORDS = """
    account address airport animals another answer autumn balance because bedroom between
    birthday borrow bottle breakfast brother building business camera candles careful
    central century chicken children chocolate cinema climate clothes coffee college
    comfort company concert correct country courage cousin culture curtain dancing daughter
    decision dinner doctor economy evening example exercise factory family farmer festival
    finger flowers forest freedom friend garden gentle glasses government guitar harbour
    history holiday hospital husband island journey kitchen language library message
    minute morning mountain museum neighbour nothing number office orange painting parents
    picture planet pocket police present problem question railway remember restaurant
    river season shelter summer teacher""".split()
assert len(set(ENGLISH_WORDS)) == 100
def write_segmented_pair(raw, n=1500, seed=3):
    """An English-Japanese-like corpus: the "en" side has few long words, the "ja" side
    the same content as many short tokens (each word becomes two tokens of one or two
    kana, and every second word gets a particle), so "ja" has 2 to 2.5 times the tokens
    of "en" on every pair, in words and in BPE pieces alike (a BPE of 1000 pieces holds
    each of the 100 words and their tokens whole). Lines 5, 17 and 600 have an empty side, and 30 pairs (ids
    ``BAD``) are misaligned: their "ja" side belongs to a sentence 4 times as long.
    The "en" words are English (a pretrained language identifier, the langid check, knows
    random letters for no English). Returns the ids of the broken pairs."""
    rng = random.Random(seed)
    kana = [chr(c) for c in range(0x3042, 0x3094)]
    words = ENGLISH_WORDS
    tokens = {w: ["".join(rng.choice(kana) for _ in range(rng.randint(1, 2))) for _ in range(2)]
              for w in words}
    particles = ["は", "が", "を", "に", "で"]

    def ja(sentence):
        out = []
        for i, w in enumerate(sentence):
            out += tokens[w] + ([rng.choice(particles)] if i % 2 else [])
        return " ".join(out) + " 。"

    bad = set(rng.sample(range(50, n), 30))
    en_lines, ja_lines = [], []
    for i in range(n):
        sentence = rng.choices(words, k=rng.randint(3, 12))
        en_lines.append(" ".join(sentence) + " .")
        ja_lines.append(ja(sentence + rng.choices(words, k=3 * len(sentence)) if i in bad
                           else sentence))
    for i in (5, 17, 600):
        (en_lines if i % 2 else ja_lines)[i] = ""
    (raw / "train.en").write_text("\n".join(en_lines) + "\n", encoding="utf-8")
    (raw / "train.ja").write_text("\n".join(ja_lines) + "\n", encoding="utf-8")
    for split in ("valid", "test"):
        for lang, lines in (("en", en_lines), ("ja", ja_lines)):
            (raw / f"{split}.{lang}").write_text("\n".join(lines[700:720]) + "\n", encoding="utf-8")
    return bad | {5, 17, 600}


@pytest.fixture(scope="module")
def segmented(tmp_path_factory):
    raw = tmp_path_factory.mktemp("en-ja-raw")
    broken = write_segmented_pair(raw)
    return raw, broken


def segmented_args(raw, out, *flags):
    return [SCRIPTS / "prepare-corpus.sh", "--src", "en", "--tgt", "ja", "--train", raw / "train",
            "--valid", raw / "valid", "--test", raw / "test", "--out", out, "--bpe-size", "1000",
            "--workers", "1", *flags]


def test_moses_word_rule_would_drop_most_of_the_segmented_pair(segmented, tmp_path):
    """The case that the filters must survive: Moses' rule on words (the old default)."""
    raw, _ = segmented
    proc = run([sys.executable, SCRIPTS / "clean_corpus.py", "--in-src", raw / "train.en",
                "--in-tgt", raw / "train.ja", "--out-src", tmp_path / "en", "--out-tgt",
                tmp_path / "ja", "--filter", "--absolute-ratio"])
    kept = len((tmp_path / "en").read_text().splitlines())
    assert kept < 0.3 * 1500
    assert "WARNING" in proc.stderr and "--absolute-ratio or --no-ratio-filter" in proc.stderr


def test_prepare_corpus_keeps_a_differently_segmented_pair(segmented, tmp_path):
    raw, broken = segmented
    out = tmp_path / "data"
    proc = run(segmented_args(raw, out))
    assert "WARNING" not in proc.stdout + proc.stderr
    kept = assert_kept_lines_map(out, raw / "train.en", raw / "train.ja", "en", "ja",
                                 dataset_len(out / "train.en-ja.en"))
    # everything but the broken pairs (a few clean ones may fall just outside the ratio)
    assert not set(kept) & {5, 17, 600}
    assert len(set(kept) & broken) <= 3
    assert len(kept) >= 0.97 * (1500 - len(broken))
    assert "median" in proc.stdout
    # the pair checks leave the long-against-short sides of clean pairs alone
    header = json.loads((out / "train.en-ja.autoassist.json").read_text())
    assert header["pair_checks"]["flagged"] <= 0.01 * header["num_rows"]

    # --absolute-ratio (Moses' rule on pieces) drops every pair: a clear stop, with why
    proc = run(segmented_args(raw, out, "--absolute-ratio"), check=False)
    assert proc.returncode != 0
    assert "WARNING: 1497 of 1497 pairs (100.0%) were dropped" in proc.stderr
    assert "token ratio off 1 (--absolute-ratio) by more than a factor 1.5" in proc.stderr
    assert "change with --ratio R, --absolute-ratio or --no-ratio-filter" in proc.stderr
    assert "no training pairs left after the piece filters" in proc.stderr
    # with --ratio 2.2 it keeps the pairs of 3 to 5 words (ja/en pieces 2 to 2.2)
    proc = run(segmented_args(raw, out, "--absolute-ratio", "--ratio", "2.2"))
    assert "step bpe-train: reusing" in proc.stdout and "step piece-filter: keeping" in proc.stdout
    n_absolute = dataset_len(out / "train.en-ja.en")
    assert 0 < n_absolute < 0.5 * len(kept)
    assert all(len(line.split()) <= 6 for line in  # 5 words and the full stop
               (out / "spm" / "train.en").read_text(encoding="utf-8").splitlines())
    assert f"WARNING: {1497 - n_absolute} of 1497 pairs" in proc.stderr
    assert len((out / "train.kept-lines").read_text().split()) == n_absolute

    # --no-ratio-filter --max-len 20: exactly the pairs with a side over 20 pieces are dropped
    proc = run(segmented_args(raw, out, "--no-ratio-filter", "--max-len", "20"))
    ja_pieces = [len(line.split()) for line in
                 (out / "spm" / "train.unfiltered.ja").read_text(encoding="utf-8").splitlines()]
    en_pieces = [len(line.split()) for line in
                 (out / "spm" / "train.unfiltered.en").read_text(encoding="utf-8").splitlines()]
    expected = sum(1 for a, b in zip(en_pieces, ja_pieces) if a <= 20 and b <= 20)
    assert expected < 0.85 * 1497  # enough to warn
    assert dataset_len(out / "train.en-ja.en") == expected
    assert f"kept {expected} of 1497 pairs ({1497 - expected} dropped: {1497 - expected} with " \
        "a side under 1 or over 20 tokens)" in proc.stdout
    assert "with a side under 1 or over 20 tokens; change with --min-len N / --max-len N" \
        in proc.stderr
    assert_kept_lines_map(out, raw / "train.en", raw / "train.ja", "en", "ja", expected)


def test_prepare_corpus_rejects_bad_filter_values(segmented, tmp_path):
    raw, _ = segmented
    for flags, message in ((["--ratio", "0.5"], "--ratio needs a number of at least 1"),
                           (["--max-len", "ten"], "--max-len needs a whole number"),
                           (["--max-len"], "--max-len needs a value")):
        proc = run(segmented_args(raw, tmp_path / "out", *flags), check=False)
        assert proc.returncode != 0 and message in proc.stderr, proc.stderr
        assert not (tmp_path / "out" / "raw").exists()


@pytest.mark.parametrize("flags, message", [
    (["--workers", "0"], "--workers needs a whole number of at least 1 (got '0')"),
    (["--bpe-size", "0"], "--bpe-size needs a whole number of at least 3 (got '0')"),
    (["--bpe-size", "2"], "--bpe-size needs a whole number of at least 3 (got '2')"),
], ids=["workers-0", "bpe-size-0", "bpe-size-2"])
def test_prepare_corpus_rejects_counts_too_small_before_any_work(flags, message, tmp_path):
    """--workers 0 used to pass the whole-number check and crash fairseq-preprocess with a
    ZeroDivisionError at the end; --bpe-size 0 crashed sentencepiece with an INTERNAL error."""
    for split in ("train", "valid", "test"):
        (tmp_path / f"{split}.src").write_text("a b c\nd e f\n")
        (tmp_path / f"{split}.tgt").write_text("x y\nz w\n")
    proc = run(["bash", SCRIPTS / "prepare-corpus.sh", "--src", "src", "--tgt", "tgt",
                "--train", tmp_path / "train", "--valid", tmp_path / "valid", "--test",
                tmp_path / "test", "--out", tmp_path / "out", *flags], check=False, timeout=60)
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr
    assert not (tmp_path / "out").exists()


def test_prepare_corpus_explains_a_bpe_size_below_the_characters(tmp_path):
    """A --bpe-size below what the text's characters need: sentencepiece's error comes with
    what it means and the fix."""
    for split in ("train", "valid", "test"):
        (tmp_path / f"{split}.src").write_text("a b c\nd e f\n")
        (tmp_path / f"{split}.tgt").write_text("x y\nz w\n")
    proc = run(["bash", SCRIPTS / "prepare-corpus.sh", "--src", "src", "--tgt", "tgt",
                "--train", tmp_path / "train", "--valid", tmp_path / "valid", "--test",
                tmp_path / "test", "--out", tmp_path / "out", "--bpe-size", "5"],
               check=False, timeout=60)
    assert proc.returncode != 0
    assert "Vocabulary size is smaller than required_chars" in proc.stderr
    assert "step bpe-train failed" in proc.stderr and "raise --bpe-size to at least M" \
        in proc.stderr, proc.stderr


def test_clean_corpus_rules(tmp_path):
    """Each rule on a small corpus: counts, the median ratio, line ids through two steps."""
    src = ["a b c d", "", "a b", "a " * 300, "a b c d e f g h i j k l", "a b c", "x" * 50]
    tgt = ["a b c d e f g h", "a", "a b c d", "a", "a b", "a b c d e f", "y"]
    (tmp_path / "in.s").write_text("\n".join(src) + "\n")
    (tmp_path / "in.t").write_text("\n".join(tgt) + "\n")

    def clean(*flags, ids_in=None):
        args = [sys.executable, SCRIPTS / "clean_corpus.py", "--in-src", tmp_path / "in.s",
                "--in-tgt", tmp_path / "in.t", "--out-src", tmp_path / "out.s", "--out-tgt",
                tmp_path / "out.t", "--filter", "--line-ids-out", tmp_path / "ids", *flags]
        if ids_in:
            (tmp_path / "ids.in").write_text("".join(f"{i}\n" for i in ids_in))
            args += ["--line-ids-in", tmp_path / "ids.in"]
        proc = run(args)
        return [int(x) for x in (tmp_path / "ids").read_text().split()], proc

    # median src/tgt of the pairs that pass the other rules: 0.5 (lines 0, 2, 5), so line 4
    # (ratio 6) is off by a factor 12 and line 6 (1 against 1) by a factor 2 (without slack)
    kept, proc = clean("--ratio-slack", "0")
    assert kept == [0, 2, 5]
    assert "kept 3 of 7 pairs (4 dropped: 1 with an empty side; 1 with a side under 1 or " \
        "over 250 tokens; 2 with a src/tgt token ratio off the corpus median 0.500" in proc.stdout
    assert "WARNING: 4 of 7 pairs (57.1%) were dropped" in proc.stderr
    assert (tmp_path / "out.s").read_text().splitlines() == [src[0], src[2], src[5]]
    assert (tmp_path / "out.t").read_text().splitlines() == [tgt[0], tgt[2], tgt[5]]
    # by default a side may have 2 tokens beyond the ratio: line 6 (one token more than
    # the ratio allows) stays, line 4 (ten more) goes
    kept, proc = clean()
    assert kept == [0, 2, 5, 6] and "factor 1.5 (and 2 tokens)" in proc.stdout
    assert clean("--absolute-ratio")[0] == [6]
    assert clean("--no-ratio-filter")[0] == [0, 2, 4, 5, 6]
    assert clean("--no-ratio-filter", "--max-chars", "40")[0] == [0, 2, 4, 5]
    assert clean("--no-ratio-filter", "--max-len", "0")[0] == [0, 2, 3, 4, 5, 6]
    assert clean("--no-ratio-filter", "--min-len", "2")[0] == [0, 2, 4, 5]
    assert clean("--ratio", "12.5")[0] == [0, 2, 4, 5, 6]
    # ids of an earlier step are carried through
    assert clean("--ratio", "12.5", ids_in=[10, 11, 12, 13, 14, 15, 16])[0] == [10, 12, 14, 15, 16]
    # no warning when the share dropped is within --warn-above
    kept, proc = clean("--no-ratio-filter", "--max-len", "0", "--warn-above", "0.15")
    assert len(kept) == 6 and "WARNING" not in proc.stderr


def test_clean_corpus_errors_name_the_problem(tmp_path):
    (tmp_path / "in.s").write_text("a\nb\n")
    (tmp_path / "in.t").write_text("a\nb\n")
    (tmp_path / "ids").write_text("0\n")
    base = [sys.executable, SCRIPTS / "clean_corpus.py", "--in-src", tmp_path / "in.s",
            "--in-tgt", tmp_path / "in.t", "--out-src", tmp_path / "o.s", "--out-tgt",
            tmp_path / "o.t", "--filter"]
    proc = run(base + ["--line-ids-in", tmp_path / "ids"], check=False)
    assert proc.returncode == 2 and "holds 1 line ids but the input has 2 lines" in proc.stderr
    proc = run(base + ["--ratio", "0.9"], check=False)
    assert proc.returncode == 2 and "--ratio must be at least 1 (got 0.9)" in proc.stderr


def test_text_that_is_not_utf8_is_refused_in_references_and_counted_in_training(tmp_path):
    """A Latin-1 reference would be scored with its bad bytes replaced; a training corpus
    gets them replaced too, with a count."""
    (tmp_path / "in.s").write_text("Munich is nice\nhello there\n")
    (tmp_path / "in.t").write_bytes("München ist schön\nhallo\n".encode("latin-1"))
    base = [sys.executable, SCRIPTS / "clean_corpus.py", "--in-src", tmp_path / "in.s",
            "--in-tgt", tmp_path / "in.t", "--out-src", tmp_path / "o.s", "--out-tgt",
            tmp_path / "o.t"]
    proc = run(base, check=False)  # valid/test: copied as they are
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"1 lines of {tmp_path / 'in.t'} are not valid UTF-8 (first: line 1)" in proc.stderr
    assert "iconv" in proc.stderr and not (tmp_path / "o.t").exists()
    proc = run(base + ["--filter", "--no-ratio-filter"], check=False)
    assert proc.returncode == 0 and "WARNING: 1 lines of" in proc.stderr
