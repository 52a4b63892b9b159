"""scripts/evaluate.sh: fairseq-generate + detokenised sacreBLEU on a briefly trained model."""

import re

import pytest

import warm
from scripts_helpers import SCRIPTS, make_synthetic_data, run
from utils import REPO

SIGNATURE = re.compile(r"nrefs:1\|case:mixed\|eff:no\|tok:13a\|smooth:exp\|version:\d")

TINY_TRANSFORMER = [
    "--arch", "transformer", "--encoder-layers", "1", "--decoder-layers", "1",
    "--encoder-embed-dim", "32", "--decoder-embed-dim", "32", "--encoder-ffn-embed-dim", "64",
    "--decoder-ffn-embed-dim", "64", "--encoder-attention-heads", "2",
    "--decoder-attention-heads", "2", "--share-all-embeddings",
]


@pytest.fixture(scope="module")
def trained(synthetic_data, tmp_path_factory):
    root = tmp_path_factory.mktemp("evaluate")
    data = synthetic_data  # conftest: make_synthetic_data(..., pairs=300, bpe_size=300)
    save_dir = root / "checkpoints"
    run(["fairseq-train", data, "--task", "translation", *TINY_TRANSFORMER,
         "--optimizer", "adam", "--lr", "0.001", "--criterion", "label_smoothed_cross_entropy",
         "--label-smoothing", "0.1", "--max-tokens", "500", "--max-update", "5", "--cpu",
         "--save-dir", save_dir, "--save-interval-updates", "2", "--num-workers", "0",
         "--log-format", "simple", "--seed", "1"], timeout=300)
    return data, save_dir


def test_evaluate_prints_sacrebleu_signature(trained):
    data, save_dir = trained
    proc = run([SCRIPTS / "evaluate.sh", data, save_dir, "--cpu", "--",
                "--max-len-a", "1", "--max-len-b", "5"], timeout=300)
    out = proc.stdout
    assert re.search(r"^BLEU = \d+\.\d+ ", out, re.M), out
    assert SIGNATURE.search(out), out
    hyp = save_dir / "hyp.checkpoint_best.test.tgt"
    refs = (data / "raw" / "test.tgt").read_text().splitlines()
    assert len(hyp.read_text().splitlines()) == len(refs) == 30
    assert "no hypothesis" not in proc.stderr  # every test sentence was translated


def test_evaluate_averages_last_checkpoints(trained):
    data, save_dir = trained
    proc = run([SCRIPTS / "evaluate.sh", data, save_dir, "--avg-last", "2", "--beam", "2",
                "--lenpen", "1.0", "--subset", "valid", "--cpu", "--",
                "--max-len-a", "1", "--max-len-b", "5"], timeout=300)
    assert "averaged 2 checkpoints (checkpoint_1_2.pt, checkpoint_1_4.pt)" in proc.stdout
    assert (save_dir / "checkpoint.avg2.pt").exists()
    assert SIGNATURE.search(proc.stdout)
    assert len((save_dir / "hyp.checkpoint.avg2.valid.tgt").read_text().splitlines()) == 40


def test_evaluate_errors_name_the_missing_thing(trained, tmp_path):
    data, save_dir = trained
    proc = run([SCRIPTS / "evaluate.sh", data, tmp_path], check=False)
    assert proc.returncode != 0 and "checkpoint_last.pt" in proc.stderr
    proc = run([SCRIPTS / "evaluate.sh", data, save_dir, "--avg-last", "9"], check=False)
    assert proc.returncode != 0 and "only 2" in proc.stderr


def test_evaluate_passes_the_sacrebleu_tokenizer(trained):
    """--tokenize picks sacreBLEU's tokenizer (e.g. zh, ja-mecab for other targets)."""
    data, save_dir = trained
    proc = run([SCRIPTS / "evaluate.sh", data, save_dir, "--checkpoint", "checkpoint_last.pt",
                "--tokenize", "char", "--beam", "1", "--cpu", "--",
                "--max-len-a", "1", "--max-len-b", "5"], timeout=300)
    assert "|tok:char|" in proc.stdout and "tok:13a" not in proc.stdout
    proc = run([SCRIPTS / "evaluate.sh", data, save_dir, "--tokenize"], check=False)
    assert proc.returncode != 0 and "--tokenize needs a value" in proc.stderr


def test_copied_outputs_counts_translations_equal_to_their_source(tmp_path):
    """research.copied_outputs: a copy ignores case and end blanks; a near copy is not one;
    a hypothesis file of another length is refused with the reason."""
    import sys

    from research.copied_outputs import copies

    src = ["A dog runs.", "Two men talk", "a cat"]
    assert copies(src, ["a dog runs. ", "Zwei Männer reden", "a cat!"]) == [0]
    (tmp_path / "src").write_text("\n".join(src) + "\n")
    (tmp_path / "hyp").write_text("Ein Hund rennt.\ntwo men talk\nA CAT\n")
    (tmp_path / "short").write_text("Ein Hund rennt.\n")
    proc = warm.run([sys.executable, "-m", "research.copied_outputs", "--source",
                     tmp_path / "src", tmp_path / "hyp"], capture_output=True, text=True,
                    cwd=REPO, timeout=60)
    assert proc.returncode == 0 and "2 of 3 copy their source (66.7%)" in proc.stdout, proc
    proc = warm.run([sys.executable, "-m", "research.copied_outputs", "--source",
                     tmp_path / "src", tmp_path / "short"], capture_output=True, text=True,
                    cwd=REPO, timeout=60)
    assert proc.returncode != 0 and "1 hypotheses for 3 source lines" in proc.stderr


def test_bleu_scores_the_best_detokenised_hypothesis(tmp_path, capsys):
    """With --nbest, an id has several hypotheses, best first; with --tokenizer or --bpe,
    H- lines hold the tokenised text and D- lines the text that BLEU compares."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("sacrebleu_score", SCRIPTS / "sacrebleu_score.py")
    score = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(score)
    gen = tmp_path / "gen.txt"
    refs = ["the cat sat on the mat, as cats do.", "a good day to you all, my friends!"]
    gen.write_text(
        "S-1\tb\nH-1\t-0.1\ta good day to you all , my friends !\nD-1\t-0.1\t" + refs[1]
        + "\nH-1\t-0.9\tday\nD-1\t-0.9\tday\nS-0\ta\n"
        "H-0\t-0.2\tthe cat sat on the mat , as cats do .\nD-0\t-0.2\t" + refs[0]
        + "\nH-0\t-0.8\tbye\nD-0\t-0.8\tbye\n")
    ref = tmp_path / "ref.txt"
    ref.write_text("".join(r + "\n" for r in refs))
    assert score.main(["--generate-output", str(gen), "--ref", str(ref),
                       "--hyp-out", str(tmp_path / "hyp.txt")]) == 0
    assert (tmp_path / "hyp.txt").read_text() == ref.read_text()
    assert "BLEU = 100.00" in capsys.readouterr().out


def _stub_generate_env(tmp_path):
    """script_env() with a fairseq-generate first on PATH that only records its start."""
    import os

    from scripts_helpers import script_env

    stub_bin = tmp_path / "stub-bin"
    stub_bin.mkdir()
    stub = stub_bin / "fairseq-generate"
    stub.write_text(f"#!/bin/sh\ntouch {tmp_path / 'generate-started'}\n")
    stub.chmod(0o755)
    env = script_env()
    env["PATH"] = f"{stub_bin}{os.pathsep}{env['PATH']}"
    return env


@pytest.mark.parametrize("flags, message", [
    (["--tokenize", "13A"], "--tokenize 13A: unknown sacreBLEU tokenizer '13A' (did you mean "
                            "'13a'?); valid names: none, zh, 13a,"),
    (["--avg-last", "1.5"], "--avg-last needs a whole number of at least 2 (got '1.5')"),
    (["--avg-last", "abc"], "--avg-last needs a whole number of at least 2 (got 'abc')"),
    (["--avg-last", "1"], "--avg-last needs a whole number of at least 2 (got '1')"),
    (["--subset", "train"], "--subset must be test or valid (got 'train')"),
], ids=["tokenize-13A", "avg-last-1.5", "avg-last-abc", "avg-last-1", "subset-train"])
def test_evaluate_refuses_bad_values_before_translating(flags, message, tmp_path):
    """A bad --tokenize, --avg-last or --subset stops evaluate.sh with the reason before
    fairseq-generate starts (here a stub that records its start), not after it with a
    traceback, nor with a bash error and a silent fallback to checkpoint_best.pt."""
    data, ckpt = tmp_path / "data", tmp_path / "ckpt"
    (data / "raw").mkdir(parents=True)
    ckpt.mkdir()
    for split in ("train", "valid", "test"):
        (data / f"{split}.src-tgt.src.idx").touch()
        (data / "raw" / f"{split}.tgt").write_text("a\n")
    (ckpt / "checkpoint_best.pt").touch()
    proc = run(["bash", SCRIPTS / "evaluate.sh", data, ckpt, *flags], check=False, timeout=60,
               env=_stub_generate_env(tmp_path))
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr
    assert not (tmp_path / "generate-started").exists()
    assert not re.search(r"Traceback|unbound variable|syntax error|integer expression",
                         proc.stderr), proc.stderr


def test_sacrebleu_score_checks_the_tokenizer_name(tmp_path, capsys):
    """--check-tokenize answers at once; scoring with an unknown --tokenize names the
    valid tokenizers instead of a KeyError."""
    from scripts_helpers import load_script

    score = load_script("sacrebleu_score")
    assert score.main(["--check-tokenize", "char"]) == 0
    assert score.main(["--check-tokenize", "13A"]) == 2
    err = capsys.readouterr().err
    assert "unknown sacreBLEU tokenizer '13A' (did you mean '13a'?)" in err and "intl" in err
    (tmp_path / "gen.txt").write_text("D-0\t-0.1\ta cat\n")
    (tmp_path / "ref.txt").write_text("a cat\n")
    assert score.main(["--generate-output", str(tmp_path / "gen.txt"), "--ref",
                       str(tmp_path / "ref.txt"), "--hyp-out", str(tmp_path / "hyp.txt"),
                       "--tokenize", "bogus"]) == 2
    assert "--tokenize: unknown sacreBLEU tokenizer 'bogus'; valid names:" in \
        capsys.readouterr().err


def _tiny_checkpoints(directory, epochs=3):
    import torch

    directory.mkdir(parents=True, exist_ok=True)
    for epoch in range(1, epochs + 1):
        torch.save({"model": {"w": torch.full((2,), float(epoch))}, "cfg": None},
                   directory / f"checkpoint{epoch}.pt")
    return directory


@pytest.mark.parametrize("last", ["0", "-2", "two"])
def test_average_checkpoints_refuses_a_count_below_one(last, tmp_path, capsys):
    """--last 0 would average every checkpoint and --last -2 all but the two oldest."""
    from scripts_helpers import load_script

    average = load_script("average_checkpoints")
    ckpt = _tiny_checkpoints(tmp_path / "ckpt")
    with pytest.raises(SystemExit) as e:
        average.main(["--dir", str(ckpt), "--last", last, "--output", str(tmp_path / "avg.pt")])
    assert e.value.code == 2
    assert f"--last: needs a whole number of at least 1 (got '{last}')" in capsys.readouterr().err
    assert not (tmp_path / "avg.pt").exists()


def test_average_checkpoints_errors_name_a_wrong_dir_or_output(tmp_path, capsys, monkeypatch):
    """--dir naming a file, --output naming a directory, a failed write: a clear error each,
    and no OUTPUT.tmp left behind; the average itself is unchanged."""
    import torch

    from scripts_helpers import load_script

    average = load_script("average_checkpoints")
    ckpt = _tiny_checkpoints(tmp_path / "ckpt")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    for argv, message in (
            (["--dir", str(ckpt / "checkpoint1.pt"), "--output", str(tmp_path / "avg.pt")],
             "checkpoint1.pt is not a directory: give the directory that holds the checkpoints"),
            (["--dir", str(ckpt), "--output", str(out_dir)],
             f"--output {out_dir} is a directory: give the file to write, e.g. "
             f"{out_dir / 'checkpoint.avg2.pt'}")):
        with pytest.raises(SystemExit) as e:
            average.main(argv + ["--last", "2"])
        assert e.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "out.tmp").exists() and not (tmp_path / "avg.pt.tmp").exists()

    def full_disk(obj, path):
        with open(path, "wb") as f:
            f.write(b"half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(average.torch, "save", full_disk)
    assert average.main(["--dir", str(ckpt), "--last", "2", "--output",
                         str(tmp_path / "avg.pt")]) == 1
    assert "cannot write the averaged checkpoint" in capsys.readouterr().err
    assert not (tmp_path / "avg.pt.tmp").exists() and not (tmp_path / "avg.pt").exists()
    monkeypatch.undo()

    assert average.main(["--dir", str(ckpt), "--last", "2", "--output",
                         str(tmp_path / "avg.pt")]) == 0
    averaged = torch.load(tmp_path / "avg.pt", weights_only=False)
    assert averaged["model"]["w"].tolist() == [2.5, 2.5]  # epochs 2 and 3
