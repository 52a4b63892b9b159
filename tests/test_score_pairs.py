"""autoassist-score-pairs, the OpusFilter filter and the OpusCleaner filter definition: the
pair checks on raw tab-separated pairs give the flags of the fairseq path."""

import gzip
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from autoassist_fairseq.tools.mix_preparation import joined_counts
from autoassist_fairseq.checks.columns import PairCheckSettings, flagged, \
    pair_check_columns
from autoassist_fairseq.prepare import spm_train_encode as spm
from autoassist_fairseq.tools import score_pairs

ROOT = Path(__file__).resolve().parents[1]
JSON = ROOT / "autoassist_fairseq" / "tools" / "opuscleaner" / "autoassist_pair_checks.json"
LETTERS = "abcdefghijklmnopqrstuvwxyz"
# the toy languages' random words are no language py3langid knows: the langid check would
# flag nearly every pair, so it is left out here (its columns: tests/test_pair_checks_langid.py)
CHECKS = ("language", "unrelated", "digits", "script")
BPE = ["--bpe-size", "300", "--pair-checks", ",".join(CHECKS)]


def _vocab(rng, n, length=(3, 8)):
    return ["".join(rng.choice(list(LETTERS), size=rng.integers(*length))) for _ in range(n)]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """1200 pairs of a toy language pair (each "en" word has its "de" word), 15% noise:
    copies, other pairs' targets, a third language with its own letter, other numbers."""
    rng = np.random.default_rng(0)
    en, de, third = _vocab(rng, 150), _vocab(rng, 150), [w + "ñ" for w in _vocab(rng, 60)]

    def pair():
        words = rng.integers(0, 150, size=rng.integers(4, 12))
        return " ".join(en[w] for w in words), " ".join(de[w] for w in words)

    pairs = []
    for i in range(1200):
        s, t = pair()
        kind = i % 20
        if kind == 0:
            t = s  # copied
        elif kind == 1:
            t = pair()[1]  # misaligned
        elif kind == 2:
            t = " ".join(rng.choice(third, size=rng.integers(4, 12)))
        elif kind == 3:
            s, t = s + f" {rng.integers(1000, 9999)}", t + f" {rng.integers(1000, 9999)}"
        pairs.append((s, t))
    path = tmp_path_factory.mktemp("score")
    tsv = path / "pairs.tsv"
    tsv.write_text("".join(f"{s}\t{t}\n" for s, t in pairs), encoding="utf-8")
    return path, tsv, pairs


def _prepared(path, pairs):
    """The usual preparation's steps on the pairs: a joint sentencepiece model
    (autoassist_fairseq.prepare.spm_train_encode train, one thread) and the encoded pieces
    per side."""
    raw = [path / f"raw.{lang}" for lang in ("en", "de")]
    for side, file in enumerate(raw):
        file.write_text("".join(p[side] + "\n" for p in pairs), encoding="utf-8")
    model = path / "spm"
    assert spm.main(["train", "--model-prefix", str(model), "--vocab-size", "300",
                     "--threads", "1"] + [str(f) for f in raw]) == 0
    pieces = [path / f"pieces.{lang}" for lang in ("en", "de")]
    assert spm.main(["encode", "--model", f"{model}.model", "--inputs"] + [str(f) for f in raw]
                    + ["--outputs"] + [str(f) for f in pieces]) == 0
    return f"{model}.model", [[line.split() for line in f.read_text().split("\n")[:-1]]
                              for f in pieces]


def _fairseq_path_flags(pieces):
    """The flags autoassist-features gives: joined counts of the pieces, pair_check_columns,
    flagged."""
    counts, symbols, sides = joined_counts(*pieces)
    settings = PairCheckSettings(checks=CHECKS)
    checks = pair_check_columns(*counts, symbols=symbols, settings=settings, texts=sides,
                                langs=("en", "de"))
    return flagged(checks, settings)


def _read(path):
    return [line.split("\t") for line in Path(path).read_text(encoding="utf-8").splitlines()]


def test_scores_have_the_fairseq_paths_flags(corpus, tmp_path):
    path, tsv, pairs = corpus
    model, pieces = _prepared(tmp_path, pairs)
    expected = _fairseq_path_flags(pieces)
    assert 0.1 < expected.mean() < 0.4  # the noise is found, and the flags are a real test
    out = tmp_path / "scored.tsv"
    # the model of the usual preparation; one batch, then batches of 250 pairs
    for batch in ("100000", "250"):
        assert score_pairs.cli_main([str(tsv), "--src", "en", "--tgt", "de", "--out", str(out),
                                     "--spm-model", model, "--header", "--batch-size", batch,
                                     "--quiet", "--pair-checks", ",".join(CHECKS)]) == 0
        rows = _read(out)
        header, rows = rows[0], rows[1:]
        assert header[:2] == ["en", "de"] and header[-2:] == ["union_score", "flag"]
        assert [c for c in header[2:-2]] == [f"{c}_score" for c in CHECKS]
        assert [(r[0], r[1]) for r in rows] == pairs
        np.testing.assert_array_equal(np.array([int(r[-1]) for r in rows], dtype=bool),
                                      expected)
    # its own model, trained on the input as the preparation trains it
    assert score_pairs.cli_main([str(tsv), "--src", "en", "--tgt", "de", "--out", str(out),
                                 "--quiet"] + BPE) == 0
    np.testing.assert_array_equal(np.array([int(r[-1]) for r in _read(out)], dtype=bool),
                                  expected)


def test_fit_corpus_drop_flagged_and_weights(corpus, tmp_path):
    path, tsv, pairs = corpus
    scored, kept, weights = tmp_path / "s.tsv", tmp_path / "kept.tsv.gz", tmp_path / "w.txt"
    fit = tmp_path / "fit.tsv.gz"
    with gzip.open(fit, "wt", encoding="utf-8") as f:
        f.write(tsv.read_text(encoding="utf-8"))
    common = ["--src", "en", "--tgt", "de", "--fit", str(fit), "--quiet"] + BPE
    assert score_pairs.cli_main([str(tsv), "--out", str(scored)] + common) == 0
    flags = [int(r[-1]) for r in _read(scored)]
    assert score_pairs.cli_main([str(tsv), "--out", str(kept), "--drop-flagged",
                                 "--weights-out", str(weights)] + common) == 0
    with gzip.open(kept, "rt", encoding="utf-8") as f:
        assert [tuple(line.rstrip("\n").split("\t")) for line in f] == \
            [p for p, flag in zip(pairs, flags) if not flag]
    assert weights.read_text().split() == [str(1 - flag) for flag in flags]
    # a fit sample smaller than the input: every pair is still scored
    assert score_pairs.cli_main([str(tsv), "--out", str(scored), "--fit-pairs", "600",
                                 "--batch-size", "500"] + common) == 0
    rows = _read(scored)
    assert len(rows) == len(pairs) and 0.05 < np.mean([int(r[-1]) for r in rows]) < 0.5


def _shim(tmp_path):
    """PATH with autoassist-score-pairs (the installed console script, or this checkout's)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if shutil.which("autoassist-score-pairs") is None:
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        script = bin_dir / "autoassist-score-pairs"
        script.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m "
                          "autoassist_fairseq.tools.score_pairs \"$@\"\n")
        script.chmod(0o755)
        env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    return env


def test_opuscleaner_definition_runs_as_opuscleaner_runs_it(corpus, tmp_path):
    path, tsv, pairs = corpus
    definition = json.loads(JSON.read_text())
    assert definition["type"] == "bilingual"
    params = {name: p.get("default", "") for name, p in definition["parameters"].items()}
    params.update(SRC_LANG="en", TRG_LANG="de", BPE_SIZE=300, CHECKS=",".join(CHECKS))
    # opuscleaner.filters.filter_format_command: NAME=quoted value; ...; command (bash)
    command = "; ".join(f"{k}={shlex.quote(str(v))}" for k, v in params.items()) + "; " + \
        definition["command"]
    env = _shim(tmp_path)
    done = subprocess.run(["bash", "-c", command], input=tsv.read_bytes(), capture_output=True,
                          cwd=JSON.parent, env=env, timeout=300)
    assert done.returncode == 0, done.stderr.decode()
    kept = [tuple(line.split("\t")) for line in done.stdout.decode().splitlines()]
    scored = tmp_path / "scored.tsv"
    assert score_pairs.cli_main([str(tsv), "--src", "en", "--tgt", "de", "--out", str(scored),
                                 "--quiet"] + BPE) == 0
    assert kept == [p for p, r in zip(pairs, _read(scored)) if r[-1] == "0"]
    assert 0.6 * len(pairs) < len(kept) < len(pairs)


def test_opusfilter_yaml_runs_the_filter(corpus, tmp_path):
    opusfilter = pytest.importorskip("opusfilter.opusfilter",
                                     reason="opusfilter is not installed (pip install "
                                            "autoassist-fairseq[opusfilter])")
    path, tsv, pairs = corpus
    for side, lang in enumerate(("en", "de")):
        (tmp_path / f"in.{lang}").write_text("".join(p[side] + "\n" for p in pairs))
    config = {"common": {"output_directory": str(tmp_path)}, "steps": [
        {"type": "filter", "parameters": {
            "inputs": ["in.en", "in.de"], "outputs": ["out.en", "out.de"],
            "filters": [{"AutoAssistPairChecks": {"languages": ["en", "de"], "bpe_size": 300,
                                                  "checks": list(CHECKS), "chunksize": 700,
                                                  "min_fit": 600},
                         "module": "autoassist_fairseq.tools.opusfilter_filter"}]}},
        {"type": "score", "parameters": {
            "inputs": ["in.en", "in.de"], "output": "scores.jsonl",
            "filters": [{"AutoAssistPairChecks": {"languages": ["en", "de"], "bpe_size": 300,
                                                  "checks": list(CHECKS)},
                         "module": "autoassist_fairseq.tools.opusfilter_filter"}]}}]}
    opusfilter.OpusFilter(config).execute_steps()
    kept = list(zip(*[(tmp_path / f"out.{lang}").read_text().splitlines()
                      for lang in ("en", "de")]))
    assert 0.6 * len(pairs) < len(kept) < len(pairs)
    # chunks of 700 and 500 pairs: the second (under min_fit) scored by the first's fit
    scores = [json.loads(line)["AutoAssistPairChecks"]
              for line in (tmp_path / "scores.jsonl").read_text().splitlines()]
    assert len(scores) == len(pairs)
    assert {"flag", "union", "language", "unrelated"} <= set(scores[0])
    # score step: one chunk of all pairs, fitted on itself as the scorer fits the input
    scored = tmp_path / "scored.tsv"
    assert score_pairs.cli_main([str(tsv), "--src", "en", "--tgt", "de", "--out", str(scored),
                                 "--quiet"] + BPE) == 0
    assert [s["flag"] for s in scores] == [int(r[-1]) for r in _read(scored)]


# texts whose words sentencepiece's normaliser reads in context: runs of spaces, spaces at the
# ends, characters it turns into a space (no-break, ideographic, tab) or drops (zero-width),
# an accent it spells with a space before a combining mark, letters of no piece (runs of
# unknown pieces, which sentencepiece merges), its own word boundary "▁" as a character, a
# line break of LINE_BREAKS, an empty text
TRICKY = ["abc  def", " abc def ", "abc\u00a0def", "abc\u3000 def", "abc\tdef", "ab\u200bc d",
          "abc \u00b4def", "\u00b4 abc", "e\u0301 abc", "\u4e2d\u6587 abc \u4e2d \u6587\u5b57",
          "abc \u2581def \u2581", "\u2581\u2581", "abc\u2028def", "", " ", "x", "abc.def, ghi!"]


def test_a_text_is_encoded_from_its_words_to_sentencepieces_pieces(corpus):
    """The scorer encodes each distinct word of a batch once: a text's pieces are still those
    sentencepiece gives the text (as a piece text: unknown pieces by theirs), tricky texts
    included; a batch with a line break inside a text is encoded text by text."""
    from autoassist_fairseq.tools.pair_scorer import PairScorer
    from autoassist_fairseq.tools.sentencepiece_model import one_line

    _, _, pairs = corpus
    scorer = PairScorer(pairs, "en", "de", PairCheckSettings(checks=CHECKS), bpe_size=300)
    assert scorer._words  # its own BPE model
    texts = TRICKY + [s for s, _ in pairs[:50]] + [t for _, t in pairs[:50]]
    expected = scorer.sp.encode(one_line(texts), out_type=str)
    assert scorer._by_words(one_line(texts)) is not None  # the words' path, not the fallback
    for batch in (texts, texts[::-1], ["abc\ndef"] + texts):
        ids, offsets = scorer._encode_ids(batch)
        want = expected[::-1] if batch == texts[::-1] else \
            expected if batch == texts else scorer.sp.encode(one_line(batch), out_type=str)
        assert [[scorer._texts[i] for i in ids[a:b]] for a, b in zip(offsets[:-1], offsets[1:])] \
            == want
    assert scorer._by_words(["abc\ndef", "abc"]) is None
    # a model given: encoded text by text, as before
    model = scorer.sp.serialized_model_proto()
    import sentencepiece

    given = PairScorer(pairs, "en", "de", PairCheckSettings(checks=CHECKS),
                       spm_model=sentencepiece.SentencePieceProcessor(model_proto=model))
    assert not given._words
    ids, offsets = given._encode_ids(texts)
    assert [[given._texts[i] for i in ids[a:b]] for a, b in zip(offsets[:-1], offsets[1:])] \
        == expected


def _error(capsys, argv):
    code = score_pairs.cli_main(argv)
    err = capsys.readouterr().err
    assert code != 0 and "Traceback" not in err
    return err


def test_errors_name_the_line_and_the_fix(tmp_path, capsys):
    bad = tmp_path / "bad.tsv"
    bad.write_text("a b\tc d\none\ttwo\tthree\n")
    err = _error(capsys, [str(bad), "--src", "en", "--tgt", "de"])
    assert "line 2: 2 tabs" in err and "exactly one tab" in err
    empty = tmp_path / "empty.tsv"
    empty.write_text("")
    assert f"{empty}: no pairs (empty input); give tab-separated pairs, SOURCE<tab>TARGET a " \
        "line" in _error(capsys, [str(empty), "--src", "en", "--tgt", "de"])
    # each missing path with the fix (the replay of the probes: they named the path alone)
    assert f"no such file: {tmp_path / 'missing.tsv'} (INPUT not found); give a file of " \
        "tab-separated pairs" in _error(
            capsys, [str(tmp_path / "missing.tsv"), "--src", "en", "--tgt", "de"])
    assert f"no such file: {tmp_path} (INPUT is a folder, not a file); give a file" in _error(
        capsys, [str(tmp_path), "--src", "en", "--tgt", "de"])
    assert f"sentencepiece model not found: {tmp_path / 'x'}; give --spm-model the .model " \
        "file" in _error(capsys, [str(bad), "--src", "en", "--tgt", "de", "--spm-model",
                                  str(tmp_path / "x")])
    assert f"no such folder for {tmp_path / 'no' / 'out.tsv'}: {tmp_path / 'no'}; create it " \
        "first" in _error(capsys, [str(bad), "--src", "en", "--tgt", "de", "--out",
                                   str(tmp_path / "no" / "out.tsv")])
    assert "the lexical check is fitted and scored in one call on a prepared corpus " \
        "(autoassist-features); leave it out of --pair-checks" in _error(
            capsys, [str(bad), "--src", "en", "--tgt", "de", "--pair-checks", "language,lexical"])


def test_stdin_to_stdout(corpus):
    """The console script's stdin mode (spooled, sampled, scored), in a process of its own;
    a line without a tab fails with its number."""
    path, tsv, pairs = corpus
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    run = [sys.executable, "-m", "autoassist_fairseq.tools.score_pairs", "--src", "en", "--tgt",
           "de", "--quiet"] + BPE
    done = subprocess.run(run, input=tsv.read_bytes(), capture_output=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr.decode()
    assert [tuple(line.split("\t")[:2]) for line in done.stdout.decode().splitlines()] == pairs
    done = subprocess.run(run, input=b"one\ttwo\nthree four\n", capture_output=True, env=env,
                          timeout=300)
    assert done.returncode == 1 and b"stdin, line 2: 0 tabs" in done.stderr
    assert b"Traceback" not in done.stderr
