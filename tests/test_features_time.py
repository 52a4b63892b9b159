"""research.features_time: autoassist-features timed per code tree and check set."""
import json
import sys
from pathlib import Path

import pytest

from utils import run

REPO = str(__import__("pathlib").Path(__file__).resolve().parents[1])


def test_each_arm_is_timed_in_turn_with_the_other_cpu(tiny_data, tmp_path):
    out = tmp_path / "t.json"
    run([sys.executable, "-m", "research.features_time", tiny_data, "-s", "src", "-t", "tgt",
         "--code", f"here={REPO}", "--pair-checks", "language,unrelated",
         "--pair-checks", "digits", "--rounds", "2", "--threads", "1", "--out", out], cwd=REPO)
    got = json.loads(out.read_text())
    assert got["threads"] == 1 and got["code"] == {"here": REPO}
    assert list(got["runs"]) == ["here language,unrelated", "here digits"]
    for runs in got["runs"].values():
        assert len(runs) == 2
        for r in runs:  # the build's own time, from its log line, within the command's
            assert r["build_s"] is not None and 0 <= r["build_s"] <= r["wall_s"]
            assert r["cpu_s"] > 0
            assert 0 <= r["other_cpu_share"] <= 1


def test_code_from_before_the_options_builds_in_a_folder_of_links(tmp_path):
    """A tree whose autoassist-features has no --prefix writes into its data folder: it
    gets a folder of links to the data's files instead; 'default' passes no --pair-checks."""
    from research.features_time import build_command

    data, out = tmp_path / "data", tmp_path / "out"
    data.mkdir(), out.mkdir()
    for name in ("train.a-b.a.bin", "train.a-b.a.idx", "dict.a.txt", "notes.log"):
        (data / name).write_text(name)
    old = tmp_path / "old" / "autoassist_fairseq" / "features"
    old.mkdir(parents=True)
    (old / "build.py").write_text('parser.add_argument("data_dir")\n')
    cmd = build_command(str(tmp_path / "old"), str(data), str(out), "a", "b", "default")
    assert cmd[3:] == [str(out), "-s", "a", "-t", "b"]
    assert sorted(p.name for p in out.iterdir()) == ["dict.a.txt", "train.a-b.a.bin",
                                                     "train.a-b.a.idx"]
    assert (out / "train.a-b.a.bin").resolve() == data / "train.a-b.a.bin"
    new = build_command(REPO, str(data), str(tmp_path), "a", "b", "digits")
    assert new[3:] == [str(data), "--prefix", str(tmp_path / "f"), "--pair-checks", "digits",
                       "-s", "a", "-t", "b"]


def test_a_corpus_repeated_holds_its_pairs_in_order_each_time(tiny_data, tmp_path):
    from fairseq.data.indexed_dataset import MMapIndexedDataset

    out = tmp_path / "x3"
    proc = run([sys.executable, "-m", "research.repeat_corpus", tiny_data, "-s", "src",
                "-t", "tgt", "--times", "3", "--out", out], cwd=REPO)
    assert f"{out}: 1800 pairs" in proc.stdout
    for lang in ("src", "tgt"):
        one = MMapIndexedDataset(f"{tiny_data}/train.src-tgt.{lang}")
        three = MMapIndexedDataset(f"{out}/train.src-tgt.{lang}")
        assert len(three) == 3 * len(one) == 1800
        for i in (0, 599):
            assert three[i].tolist() == three[i + 600].tolist() == three[i + 1200].tolist() \
                == one[i].tolist()
        assert (out / f"dict.{lang}.txt").read_text() == \
            (Path(tiny_data) / f"dict.{lang}.txt").read_text()
    bad = run([sys.executable, "-m", "research.repeat_corpus", tiny_data, "-s", "src",
               "-t", "nope", "--times", "2", "--out", tmp_path / "y"], cwd=REPO, check=False)
    assert bad.returncode != 0 and "train.src-nope.src.bin not found" in bad.stderr


@pytest.mark.parametrize("args, message", [
    (["--code", "x=/nonexistent"], "a checkout of this repository"),
    (["--rounds", "0"], "at least 1"),
])
def test_bad_arguments_are_named(tiny_data, tmp_path, args, message):
    proc = run([sys.executable, "-m", "research.features_time", tiny_data, "-s", "src",
                "-t", "tgt", "--pair-checks", "digits", "--out", tmp_path / "t.json", *args],
               cwd=REPO, check=False)
    assert proc.returncode == 2 and message in proc.stderr


def test_a_failed_build_names_its_command(tiny_data, tmp_path):
    proc = run([sys.executable, "-m", "research.features_time", tiny_data, "-s", "src",
                "-t", "tgt", "--pair-checks", "nosuchcheck", "--out", tmp_path / "t.json"],
               cwd=REPO, check=False)
    assert proc.returncode != 0 and "failed" in proc.stderr and not (tmp_path / "t.json").exists()
