"""research/add_noise.py: seeded, exact shares, labels that say what was done, clear errors."""

import json
import sys
from collections import Counter

import pytest

from research import add_noise
import warm
from utils import REPO

N = 2000


def _corpus(tmp_path):
    """Distinct sentences, so that every corruption is visible in the text."""
    src = [" ".join(f"s{i}w{k}" for k in range(2 + i % 9)) for i in range(N)]
    tgt = [" ".join(f"t{i}w{k}" for k in range(1 + i % 7)) for i in range(N)]
    (tmp_path / "train.en").write_text("\n".join(src) + "\n")
    (tmp_path / "train.de").write_text("\n".join(tgt) + "\n")
    return src, tgt


def _run(tmp_path, *args, out="noisy/train"):
    return warm.run([sys.executable, "-m", "research.add_noise", "--src", "en", "--tgt",
                     "de", "--train", tmp_path / "train", "--out", tmp_path / out, *args],
                    capture_output=True, text=True, timeout=60, cwd=REPO)


def test_labels_match_the_corruption_and_the_shares(tmp_path):
    src, tgt = _corpus(tmp_path)
    proc = _run(tmp_path, "--share", "0.3", "--mix", "misaligned=0.4,copy=0.2,wrong_lang=0.2,"
                "truncated=0.2", "--seed", "7")
    assert proc.returncode == 0, proc.stderr
    out_src = (tmp_path / "noisy/train.en").read_text().splitlines()
    out_tgt = (tmp_path / "noisy/train.de").read_text().splitlines()
    labels = (tmp_path / "noisy/train.labels").read_text().splitlines()
    assert len(out_src) == len(out_tgt) == len(labels) == N
    counts = Counter(labels)
    assert counts["clean"] == N - 600
    for kind, share in (("misaligned", 0.4), ("copy", 0.2), ("wrong_lang", 0.2),
                        ("truncated", 0.2)):
        assert abs(counts[kind] - share * 600) <= 1, counts
    printed = json.loads(proc.stdout)
    assert printed["counts"] == {k: counts[k] for k in ("clean",) + add_noise.KINDS}
    src_set = set(src)
    for i, label in enumerate(labels):
        s, t = out_src[i], out_tgt[i]
        if label == "clean":
            assert (s, t) == (src[i], tgt[i])
        elif label == "misaligned":
            assert s == src[i] and t != tgt[i] and t in tgt
        elif label == "copy":
            assert s == src[i] and t == src[i]
        elif label == "wrong_lang":
            assert s == src[i] and t != src[i] and t in src_set
        else:
            assert label == "truncated"
            cut_src = s != src[i]
            assert cut_src != (t != tgt[i])  # exactly one side cut
            full, cut = (src[i], s) if cut_src else (tgt[i], t)
            assert full.startswith(cut) and 0 < len(cut.split()) < len(full.split())


def test_seeded_reproducibility(tmp_path):
    _corpus(tmp_path)
    outputs = []
    for seed, out in ((3, "a/train"), (3, "b/train"), (4, "c/train")):
        assert _run(tmp_path, "--seed", str(seed), out=out).returncode == 0
        outputs.append([(tmp_path / f"{out}.{s}").read_text() for s in ("en", "de", "labels")])
    assert outputs[0] == outputs[1]
    assert outputs[0][2] != outputs[2][2]  # another seed corrupts other pairs
    labels = outputs[0][2].splitlines()
    assert abs(sum(label != "clean" for label in labels) / N - 0.25) < 0.001  # the default


@pytest.mark.parametrize("args, message", [
    (["--share", "0.7"], "out of range: use 0.05-0.5"),
    (["--share", "0.01"], "out of range"),
    (["--mix", "misaligned=0.5,swap=0.5"], "unknown noise kind 'swap'"),
    (["--mix", "misaligned=0.5,copy=0.2"], "sum to 0.7, not 1"),
    (["--mix", "copy=abc"], "not KIND=NUMBER"),
    (["--truncate-range", "0.5", "0.2"], "--truncate-range"),
])
def test_bad_arguments_are_clear_errors(tmp_path, args, message):
    _corpus(tmp_path)
    proc = _run(tmp_path, *args)
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr


def test_missing_and_misaligned_inputs_are_errors(tmp_path):
    proc = _run(tmp_path)
    assert proc.returncode != 0 and "train.en.gz exists" in proc.stderr
    _corpus(tmp_path)
    (tmp_path / "train.de").write_text("one\ntwo\n")
    proc = _run(tmp_path)
    assert proc.returncode != 0 and "2000 source and 2 target lines" in proc.stderr
    (tmp_path / "train.de").write_bytes("schön\n".encode("latin-1"))
    proc = _run(tmp_path)
    assert proc.returncode != 0 and "train.de is not valid UTF-8" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_split_counts_sum_to_the_total():
    counts = add_noise.split_counts(7, {"a": 1 / 3, "b": 1 / 3, "c": 1 / 3})
    assert sum(counts.values()) == 7 and sorted(counts.values()) == [2, 2, 3]
