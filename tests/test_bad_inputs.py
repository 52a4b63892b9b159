"""Faults and bad inputs found by probing (issue 48 among them): stale or damaged feature
files, an --out that holds another corpus, folders that cannot be written and full disks,
bad labelled text, damaged checkpoints and checkpoints of another dictionary, a missing
py3langid, undecodable Assistant messages. Each gets a clear error that names the file or
flag and the fix, before anything is written or damaged (docs/design.md, "Faults and bad
inputs: what the user sees")."""

import errno
import re
import shutil
import subprocess

import numpy as np
import pytest

from autoassist_fairseq import diagnose
from autoassist_fairseq.features import build
from autoassist_fairseq.features.store import FeatureStore
from task_helpers import fairseq_task
from utils import BIN, run, train_args

PREFIX = "train.src-tgt.autoassist"


@pytest.fixture
def data(tiny_data, tmp_path):
    """A copy of the tiny corpus with its features, free to damage."""
    return shutil.copytree(tiny_data, tmp_path / "data-bin")


def _open_features(data, *extra):
    fairseq_task(data, *extra).load_dataset("train")


def test_features_of_other_text_with_the_same_lengths_are_refused(data, tmp_path, capsys):
    """A third of the source sentences edited to other words of the same length, the
    dictionary unchanged: the lengths' fingerprint cannot see it, the tokens' does, in
    training and in autoassist-filter (which would drop the wrong pairs)."""
    from autoassist_fairseq.tools.filter import cli_main as filter_main

    path = data / "train.src-tgt.src.bin"
    tokens = np.fromfile(path, dtype=np.uint16)
    words = np.unique(tokens[tokens > 3])  # not <s>, <pad>, </s>, <unk>
    edited = tokens.copy()
    pick = (tokens > 3) & (np.arange(len(tokens)) % 3 == 0)
    edited[pick] = np.roll(words, 1)[np.searchsorted(words, tokens[pick])]
    edited.tofile(path)
    with pytest.raises(ValueError, match="built for other text") as err:
        _open_features(data)
    assert str(data / PREFIX) + ".json" in str(err.value)
    assert f"autoassist-features {data} --source-lang src" in str(err.value)
    assert filter_main([str(data), "--out", str(tmp_path / "filtered")]) == 1
    err = capsys.readouterr().err
    assert "built for other text" in err and f"autoassist-features {data}" in err
    assert not (tmp_path / "filtered").exists()


def test_training_parts_that_fairseq_joins_are_refused(data):
    """fairseq trains on train, train1, ... joined; the feature file describes train."""
    for path in data.glob("train.src-tgt.*"):
        if path.suffix in (".bin", ".idx"):
            shutil.copy(path, data / path.name.replace("train.", "train1.", 1))
    with pytest.raises(ValueError, match="holds train1.src-tgt.src besides train.*one train "
                                         "split, or give the parts as data shards"):
        _open_features(data)


@pytest.mark.parametrize("name, damage, match", [
    ("json", lambda p: p.write_bytes(b""), "header .* is empty or damaged"),
    ("json", lambda p: p.write_bytes(p.read_bytes()[:40]), "header .* is empty or damaged"),
    ("data.npy", lambda p: p.write_bytes(b""), "is empty or truncated"),
    ("data.npy", lambda p: p.write_bytes(p.read_bytes()[:200]), "is empty or truncated"),
    ("pair-checks.npy", lambda p: p.write_bytes(b""), "is empty or truncated"),
    ("pair-checks.npy", lambda p: p.write_bytes(p.read_bytes()[:300]), "is empty or truncated"),
    ("indices.npy", lambda p: p.unlink(), "is missing"),
    ("pair-checks.npy", lambda p: p.unlink(), "is missing"),
])
def test_damaged_feature_files_name_the_file_and_the_rebuild(name, damage, match, data):
    path = data / f"{PREFIX}.{name}"
    damage(path)
    with pytest.raises((ValueError, FileNotFoundError), match=match) as err:
        FeatureStore.open(str(data / PREFIX), rebuild_hint="REBUILD-COMMAND")
    assert str(path) in str(err.value) and "rebuild it with: REBUILD-COMMAND" in str(err.value)


@pytest.mark.parametrize("version", [0, 2])
def test_a_feature_file_of_another_format_is_refused_naming_the_rebuild(data, tmp_path,
                                                                        capsys, version):
    """A feature file whose header gives another format version than this release writes
    (an older autoassist-features', or a newer one's): training stops at the dataset's load,
    and autoassist-filter before writing anything, naming the file, both versions and the
    command that rebuilds it."""
    import json

    from autoassist_fairseq.features.store import FORMAT_VERSION
    from autoassist_fairseq.tools.filter import cli_main as filter_main

    header = data / f"{PREFIX}.json"
    meta = json.loads(header.read_text())
    assert meta["version"] == FORMAT_VERSION == 1 and version != FORMAT_VERSION
    header.write_text(json.dumps(dict(meta, version=version)))
    message = f"{header} has format version {version}, expected {FORMAT_VERSION}; rebuild it " \
              f"with: autoassist-features {data} --source-lang src --target-lang tgt"
    with pytest.raises(ValueError) as err:
        _open_features(data)
    assert message in str(err.value), str(err.value)
    assert filter_main([str(data), "--out", str(tmp_path / "filtered")]) == 1
    assert message in capsys.readouterr().err
    assert not (tmp_path / "filtered").exists()


def test_a_cut_pair_checks_file_stops_the_run_even_by_default(data):
    """Before, a cut pair-checks.npy only turned the checks off after a warning."""
    path = data / f"{PREFIX}.pair-checks.npy"
    path.write_bytes(path.read_bytes()[:300])
    with pytest.raises(ValueError, match="pair-checks.npy is empty or truncated") as err:
        _open_features(data)
    assert f"autoassist-features {data}" in str(err.value)


def test_unreadable_is_not_reported_as_missing(data, monkeypatch):
    """Permission denied (simulated: the tests may run as root) says so, not 'rebuild'."""
    real = np.load

    def load(path, *args, **kwargs):
        if str(path).endswith(".data.npy"):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(np, "load", load)
    with pytest.raises(PermissionError, match="permission denied") as err:
        FeatureStore.open(str(data / PREFIX), rebuild_hint="REBUILD-COMMAND")
    assert f"{PREFIX}.data.npy" in str(err.value) and "missing" not in str(err.value)


def test_the_advice_for_a_custom_prefix_builds_that_prefix(data, tmp_path):
    prefix = tmp_path / "elsewhere" / "feats"
    with pytest.raises(FileNotFoundError) as err:
        _open_features(data, "--assistant-features", str(prefix))
    command = str(err.value).split("build it with: ", 1)[1].split()
    assert command[0] == "autoassist-features" and command[-2:] == ["--prefix", str(prefix)]
    assert build.cli_main(command[1:]) == 0  # autoassist-features, in this process
    _open_features(data, "--assistant-features", str(prefix))  # now it opens and matches


def test_every_data_shards_features_are_checked_before_training(data, tmp_path):
    """``--data a:b`` opens shard b at epoch 2: its missing or stale feature file must stop
    the run at the start, naming that shard, not hours in; one --assistant-features prefix
    cannot describe two shards."""
    shard = shutil.copytree(data, tmp_path / "shard2")
    task = fairseq_task(f"{data}:{shard}")
    task.load_dataset("train")  # both files fine
    for path in shard.glob(PREFIX + ".*"):
        path.unlink()
    with pytest.raises(FileNotFoundError, match=f"{shard}/{PREFIX}.json.*autoassist-features "
                                                f"{shard}"):
        fairseq_task(f"{data}:{shard}").load_dataset("train")
    with pytest.raises(ValueError, match="--assistant-features .* names one feature file, but "
                                         "--data has 2 data shards"):
        fairseq_task(f"{data}:{shard}", "--assistant-features", str(data / PREFIX))  # no data
    _open_features(data, "--assistant-features", str(data / PREFIX))  # one shard: fine


def test_a_feature_file_or_folder_for_the_prefix_names_the_prefix(data):
    """--assistant-features takes the files' path prefix: given the header file or the
    folder, the error gives the prefix to use, not a build that would write PREFIX.json.json."""
    with pytest.raises(FileNotFoundError, match=f"a prefix is wanted.*--assistant-features "
                                                f"{data}/{PREFIX}\\)$"):
        FeatureStore.open(str(data / PREFIX) + ".json", rebuild_hint="REBUILD")
    with pytest.raises(FileNotFoundError, match=f"a folder.*--assistant-features {data}/{PREFIX}"):
        FeatureStore.open(str(data), rebuild_hint="REBUILD")
    with pytest.raises(FileNotFoundError, match="build it with: REBUILD"):  # truly missing
        FeatureStore.open(str(data / "other"), rebuild_hint="REBUILD")


def test_filter_refuses_an_out_that_holds_another_corpus(data, tmp_path, capsys, monkeypatch):
    """--out naming another prepared corpus (with a real raw/ folder) is refused before
    anything in it changes; an earlier output of autoassist-filter is replaced, but only by
    a complete one: a write that fails (a full disk) leaves it as it was, and no temporary
    folder beside it."""
    from autoassist_fairseq.features import build as build_module
    from autoassist_fairseq.tools.filter import cli_main as filter_main

    other = shutil.copytree(data, tmp_path / "other")
    (other / "raw").mkdir()
    (other / "raw" / "train.src").write_text("a sentence\n")
    before = {p.name: p.read_bytes() for p in other.iterdir() if p.is_file()}
    assert filter_main([str(data), "--out", str(other)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"autoassist-filter: error: --out {other} already holds"), err
    assert "give a new folder" in err and f"remove {other} first" in err, err
    assert {p.name: p.read_bytes() for p in other.iterdir() if p.is_file()} == before
    assert not any(p.is_symlink() for p in other.iterdir()) and (other / "raw").is_dir()

    out = tmp_path / "filtered"
    assert filter_main([str(data), "--out", str(out), "--no-features"]) == 0
    first = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    assert "autoassist-filter.json" in first and "train.src-tgt.src.bin" in first

    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(build_module, "build_features", full_disk)
    assert filter_main([str(data), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"writing {out} failed: No space left on device; {out} is as it was" in err, err
    assert f"free space on the disk of {tmp_path}" in err and "another disk" in err, err
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data-bin", "filtered", "other"]
    monkeypatch.undo()
    assert filter_main([str(data), "--out", str(out)]) == 0  # an earlier output: replaced
    assert list(out.glob("*.autoassist.json"))


def test_features_into_a_folder_that_cannot_be_written_stop_before_any_work(data, tmp_path,
                                                                            monkeypatch, caplog):
    """A read-only --prefix folder is named, with the fix, before the features are counted
    (the build takes minutes on a large corpus). The tests may run as root, who writes to
    any folder: there the file system's refusal is simulated."""
    import os
    import tempfile

    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    real = tempfile.mkstemp

    def mkstemp(*args, dir=None, **kwargs):
        if dir is not None and os.path.abspath(dir) == str(folder):
            raise OSError(errno.EROFS, "Read-only file system", str(dir))
        return real(*args, dir=dir, **kwargs)

    if os.geteuid() == 0:
        monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    monkeypatch.setattr(build, "read_counts", lambda *a, **k: pytest.fail("the work started"))
    assert build.cli_main([str(data), "-s", "src", "-t", "tgt", "--prefix",
                           str(folder / "feats")]) == 1
    assert f"cannot write the feature file {folder}/feats.*: the folder {folder} is not " \
           "writable" in caplog.text
    assert "give --prefix in a folder this user can write" in caplog.text
    assert "--assistant-features at the same prefix" in caplog.text
    assert list(folder.iterdir()) == []


def test_a_full_disk_while_writing_features_names_the_file_and_leaves_nothing(data, tmp_path,
                                                                              monkeypatch,
                                                                              caplog):
    """ENOSPC on the third array: the error names that file and its disk; no .tmp file and
    no lone array is left, and an earlier feature file at the prefix stays whole."""
    real = np.save

    def save(file, array, *args, **kwargs):
        if str(getattr(file, "name", file)).endswith(".data.npy.tmp"):
            file.write(b"\x93NUMPY cut")
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(file, array, *args, **kwargs)

    monkeypatch.setattr(np, "save", save)
    folder = tmp_path / "feats"
    assert build.cli_main([str(data), "-s", "src", "-t", "tgt", "--prefix",
                           str(folder / "f")]) == 1
    assert f"cannot write the feature file {folder}/f.data.npy: No space left on device; " \
           f"the disk of {folder} has " in caplog.text
    assert f"(df -h {folder}); free space there, or give --prefix on another disk" in caplog.text
    assert list(folder.iterdir()) == []
    before = {p.name: p.read_bytes() for p in data.glob(PREFIX + ".*")}
    assert build.cli_main([str(data), "-s", "src", "-t", "tgt"]) == 1
    assert {p.name: p.read_bytes() for p in data.glob(PREFIX + ".*")} == before
    FeatureStore.open(str(data / PREFIX))


HEADER = b"en\tde\tlabel\tbicleaner\n"
GOOD = b"a house\tein Haus\tV\t0.7\n"


@pytest.mark.parametrize("name, content, message", [
    ("pairs.tsv.gz", HEADER + GOOD, "pairs.tsv.gz is not a complete gzip file (Not a gzipped "
                                    "file (b'en')): give the file gzip-compressed whole, or a "
                                    "plain-text file without the .gz suffix"),
    ("pairs.tsv", HEADER + GOOD + b"caf\xe9\tCaf\xe9\tV\t0.5\n",
     "pairs.tsv line 3: not UTF-8 (byte 0xe9 at byte 4 of the line); give the file in UTF-8"),
    ("pairs.tsv", HEADER + b"a\tb\tV\tn/a\n" + GOOD,
     "pairs.tsv line 2, column 'bicleaner': 'n/a' is not a number; give the Bicleaner score, "
     "or leave the field empty"),
    ("pairs.tsv", HEADER + GOOD + GOOD + b"a house\tein Haus\n",
     "pairs.tsv line 4: 2 fields where the header has 4 (no column 'label', 'bicleaner'); give "
     "every line a tab-separated field for each column"),
    ("clean", HEADER + GOOD, "clean.de line 2: not UTF-8 (byte 0xfc at byte 2 of the line)"),
])
def test_bad_labelled_or_clean_text_names_the_file_line_and_column(tmp_path, caplog, name,
                                                                   content, message):
    """autoassist-check-report: a .gz that is not gzip, a line that is not UTF-8, a
    Bicleaner score that is not a number, a short row: one error line naming the file,
    the line (and column) and the fix; exit code 1, no traceback."""
    from autoassist_fairseq.tools import check_report

    labelled = tmp_path / ("pairs.tsv" if name == "clean" else name)
    labelled.write_bytes(content)
    (tmp_path / "clean.en").write_text("a house\n" * 3)
    (tmp_path / "clean.de").write_bytes(b"ein Haus\nH\xfcte\nein Haus\n")
    assert check_report.cli_main([str(labelled), "--clean", str(tmp_path / "clean"), "--src",
                                  "en", "--tgt", "de", "--out", str(tmp_path / "r.json")]) == 1
    errors = [r for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and errors[0].getMessage().startswith(str(tmp_path)), caplog.text
    assert message in errors[0].getMessage() and "Traceback" not in caplog.text, caplog.text
    assert not (tmp_path / "r.json").exists()


@pytest.fixture(scope="module")
def tiny_checkpoint(tiny_data, tmp_path_factory):
    """checkpoint_last.pt of 3 updates on the tiny corpus (read-only: copy it to damage it)."""
    save_dir = tmp_path_factory.mktemp("tiny-run")
    run(train_args(tiny_data, save_dir, extra=["--max-update", "3", "--assistant-sync"]))
    return save_dir / "checkpoint_last.pt"


def _diagnose_error(data, checkpoint) -> str:
    with pytest.raises(SystemExit) as exit:
        diagnose.cli_main(["--data", str(data), "--checkpoint", str(checkpoint)])
    return str(exit.value.code)


def test_diagnose_names_a_checkpoint_of_another_dictionary(tiny_checkpoint, data):
    """Data whose dictionaries gained symbols: not a size-mismatch RuntimeError, but what
    differs and the fix."""
    for name in ("dict.src.txt", "dict.tgt.txt"):
        with open(data / name, "a") as f:
            f.write("".join(f"zz{i} 1\n" for i in range(16)))
    error = _diagnose_error(data, tiny_checkpoint)
    assert error.startswith(f"autoassist-diagnose: error: --checkpoint {tiny_checkpoint} was "
                            f"trained on another dictionary than --data {data}'s"), error
    assert "give --data the data directory the run trained on" in error, error
    assert "size mismatch" not in error


def _damage(path, how):
    if how == "empty":
        path.write_bytes(b"")
    else:  # 4 KiB of random bytes in the middle, the length unchanged
        content = bytearray(path.read_bytes())
        middle = len(content) // 2
        content[middle:middle + 4096] = np.random.default_rng(0).bytes(4096)
        path.write_bytes(bytes(content))


@pytest.mark.parametrize("how, problem", [
    ("empty", "is empty (0 bytes: a save that was cut off"),
    ("random", "is damaged (Bad CRC-32 for file"),
])
def test_a_damaged_checkpoint_last_is_named_at_resume_and_in_diagnose(tiny_checkpoint,
                                                                      tiny_data, tmp_path,
                                                                      how, problem):
    """fairseq-train's resume and autoassist-diagnose: an empty checkpoint_last.pt (not a
    bare EOFError), or one with bytes overwritten inside (not loaded as if whole): the file,
    the problem and the fix."""
    save_dir = tmp_path / "ckpt"
    save_dir.mkdir()
    path = save_dir / "checkpoint_last.pt"
    shutil.copy(tiny_checkpoint, path)
    _damage(path, how)
    proc = run(train_args(tiny_data, save_dir, extra=["--max-update", "6", "--assistant-sync"]),
               check=False)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output[-3000:]
    assert f"{path} {problem}" in output, output[-3000:]
    assert "remove it" in output and "--restore-file another checkpoint" in output
    assert "EOFError" not in output and "| train_inner |" not in output
    error = _diagnose_error(tiny_data, path)
    assert f"--checkpoint {path} {problem}" in error and "SAVE_DIR/checkpoint_last.pt" in error


def test_the_default_checks_do_not_depend_on_what_is_installed(data, monkeypatch, caplog):
    """Without py3langid the default --pair-checks (langid among them) stops before any work
    with both fixes, rather than building other flags than the same command elsewhere."""
    import sys

    from autoassist_fairseq.checks.columns import DEFAULT_CHECKS

    assert DEFAULT_CHECKS == ("language", "unrelated", "digits", "script", "langid")
    monkeypatch.setitem(sys.modules, "py3langid", None)  # not installed: import fails
    monkeypatch.setattr(build, "read_counts", lambda *a, **k: pytest.fail("the work started"))
    assert build.cli_main([str(data), "-s", "src", "-t", "tgt"]) == 1
    assert "the langid check (in --pair-checks language,unrelated,digits,script,langid, the " \
           "default's among them) needs py3langid, which is not installed: pip install " \
           "py3langid==0.4.0 (Python >= 3.10), or run without it: --pair-checks " \
           "language,unrelated,digits,script" in caplog.text, caplog.text


@pytest.mark.parametrize("damage, match", [
    ("shape", "pair-checks.npy holds \\(600, 4\\), expected \\(600, 11\\).*rebuild the features "
              "with: autoassist-features"),
    ("settings", "autoassist.json: the pair-check settings a feature file's header records: "
                 "--unrelated-p-value 7 is out of range.*autoassist-features"),
])
def test_damaged_pair_checks_stop_the_run_under_the_default_auto(data, damage, match):
    """A pair-checks array of the wrong shape, or settings out of range in the header, is a
    damaged feature file: it stops the run by default, not the checks with a warning."""
    import json

    if damage == "shape":
        path = data / f"{PREFIX}.pair-checks.npy"
        np.save(path, np.load(path)[:, :4].copy())
    else:
        header = data / f"{PREFIX}.json"
        meta = json.loads(header.read_text())
        meta["pair_checks"]["settings"]["unrelated_p_value"] = 7
        header.write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=match) as err:
        _open_features(data)  # --assistant-pair-checks auto, the default
    assert str(data / PREFIX) in str(err.value)


@pytest.mark.parametrize("payload", [b"", b"\x80\x04\x95\x05", b"\x80\x7f"])
def test_an_undecodable_message_of_the_assistant_is_an_error_not_the_pipes_end(payload):
    """An empty, cut or unknown-protocol pickle raises EOFError or ValueError when decoded,
    as the pipe's own end does: the reader must report it (the Boss stops with the cause at
    once), not end quietly and leave the Boss to time out on "sent nothing"."""
    import multiprocessing as mp
    import queue
    import threading

    from autoassist_fairseq.transport.channel import start_reader

    inbound, outbound = mp.Pipe(duplex=False)
    errors, stop = [], threading.Event()
    outbound.send_bytes(payload)
    reader = start_reader("test", inbound, queue.Queue(), stop, errors)
    reader.join(10)
    stop.set()
    outbound.close()
    inbound.close()
    assert not reader.is_alive()
    assert len(errors) == 1, errors
    assert errors[0].startswith(f"the Boss could not read a message of the Assistant process "
                                f"({len(payload)} bytes: "), errors
    assert "a message damaged in the pipe" in errors[0] and "--assistant-sync" in errors[0]


# -- issue 48's "not tried yet" cases: flags and files that change at a resume ---------------

def _resume(data, save_dir, *extra, check=False):
    """fairseq-train resumed from SAVE_DIR/checkpoint_last.pt (3 updates of the tiny run)
    for 3 more updates: ``(process, output)``."""
    proc = run(train_args(data, save_dir, extra=["--max-update", "6", "--assistant-sync",
                                                 *extra]), check=check)
    return proc, proc.stdout + proc.stderr


def _copy_checkpoint(tiny_checkpoint, tmp_path):
    save_dir = tmp_path / "ckpt"
    save_dir.mkdir()
    shutil.copy(tiny_checkpoint, save_dir / "checkpoint_last.pt")
    return save_dir


def test_a_trace_folder_given_as_a_file_stops_before_training(tiny_data, tmp_path):
    """--assistant-trace-dir naming a file: fairseq-train stops at the task's setup with the
    flag, the path and the fix, before any training or save, and the file is left as it was."""
    trace = tmp_path / "trace"
    trace.write_text("not a folder\n")
    # the real console script, not the warm server: the error as an interpreter prints it
    fairseq_train, *args = train_args(tiny_data, tmp_path / "ckpt", extra=[
        "--max-update", "3", "--assistant-sync", "--assistant-trace-dir", trace])
    proc = subprocess.run([str(BIN / fairseq_train), *map(str, args)], capture_output=True,
                          text=True, timeout=300)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output[-3000:]
    # one line, no traceback: the plugin's error for the user (autoassist_fairseq/errors.py)
    assert proc.stderr.rstrip().splitlines()[-1] == (
        f"fairseq-train: error: --assistant-trace-dir {trace} is a file: give a folder (the "
        "trace is written to DIR/trained.rank<R>.tsv)"), output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    assert "| train_inner |" not in output and not (tmp_path / "ckpt" / "checkpoint_last.pt").exists()
    assert trace.read_text() == "not a folder\n"


@pytest.mark.parametrize("edit, message", [
    ({"schema": 99}, "the checkpoint's AutoAssist state has schema 99; this autoassist-fairseq "
                     "reads schema 1 (the checkpoint is from a newer release: upgrade "
                     "autoassist-fairseq); "),
    ({"schema": None, "version": 6},
     "the checkpoint's AutoAssist state was written by a development version of "
     "autoassist-fairseq before 0.2.0 (its schema version 6), whose layouts this release does "
     "not read: finish that run with the version that started it, or "),
])
def test_an_edited_schema_version_in_a_checkpoint_stops_the_resume(tiny_checkpoint, tiny_data,
                                                                   tmp_path, edit, message):
    """The AutoAssist state's schema edited in checkpoint_last.pt (to one of a newer
    release, or to a development version's layout before 0.2.0): the resume stops before
    training, naming the schema, the one this release reads and the fix, never a fresh
    Assistant."""
    import torch

    save_dir = _copy_checkpoint(tiny_checkpoint, tmp_path)
    path = save_dir / "checkpoint_last.pt"
    state = torch.load(path, map_location="cpu", weights_only=False)
    saved = state["extra_state"]["train_iterator"]["autoassist"]
    assert saved["schema"] == 1 and "version" not in saved
    for key, value in edit.items():
        if value is None:
            del saved[key]
        else:
            saved[key] = value
    torch.save(state, path)
    edited = path.read_bytes()
    proc, output = _resume(tiny_data, save_dir)
    assert proc.returncode != 0, output[-3000:]
    assert message + "resume from another checkpoint, or relaunch with --reset-dataloader (a " \
        "new Assistant and batch plan)" in output, output[-3000:]
    assert "| train_inner |" not in output and path.read_bytes() == edited
    # autoassist-diagnose reads the same state: the same reason, its own fix, no traceback
    error = _diagnose_error(tiny_data, path)
    reason = message[:-2] if message.endswith("; ") else message.split(": finish")[0]
    assert error == (f"autoassist-diagnose: error: --checkpoint {path}: {reason}; "
                     "autoassist-diagnose reads the AutoAssist state of this release's "
                     "checkpoints: diagnose it with the autoassist-fairseq version that wrote "
                     "it, or give a checkpoint of a run of this version"), error


def test_another_lambda_max_or_pair_checks_at_a_resume_is_logged_from_where_it_applies(
        tiny_checkpoint, tiny_data, tmp_path):
    """--assistant-lambda-max 0.5 and --assistant-pair-checks off at a resume of a run of 0.9
    with the checks on: the run goes on, and one warning names both changes, from where they
    apply (the first window after the batches already planned) and how to apply them at
    once; the checkpoints it saves record this run's values."""
    import torch

    save_dir = _copy_checkpoint(tiny_checkpoint, tmp_path)
    proc, output = _resume(tiny_data, save_dir, "--assistant-lambda-max", "0.5",
                           "--assistant-pair-checks", "off", check=True)
    planned = re.search(r"resuming the batch stream at pass \d+, window \d+, with (\d+) "
                        r"batches planned", output).group(1)
    assert re.search(r"at this resume --assistant-lambda-max changed from 0.9 to 0.5 \(the "
                     r"ceiling of lambda_k, and the floor 1 - lambda_max of every pair's "
                     r"acceptance probability\); the pair checks changed from on \(\d+ pairs "
                     r"flagged, accepted at the floor\) to off \(--assistant-pair-checks, or "
                     r"the feature file's checks\): the " + planned + " batches already "
                     "planned were drawn under the saved run's values and are trained as "
                     "saved, so that the resume stays exact; this run's values apply from the "
                     f"first window after them, {planned} batches from here. To apply them at "
                     "once, resume with --reset-dataloader", output), output[-3000:]
    state = torch.load(save_dir / "checkpoint_last.pt", map_location="cpu", weights_only=False)
    saved = state["extra_state"]["train_iterator"]["autoassist"]["ranks"][0]["assistant"]
    assert saved["settings"] == {"lambda_max": 0.5, "pair_checks": None}
    # the same flags again: nothing changed, nothing to say
    _, output = _resume(tiny_data, save_dir, "--assistant-lambda-max", "0.5",
                        "--assistant-pair-checks", "off", "--max-update", "8", check=True)
    assert "at this resume" not in output


@pytest.mark.parametrize("pairs", [600, 400])
def test_a_resume_on_other_data_with_the_same_dictionary_is_refused(tiny_checkpoint, tiny_data,
                                                                    tmp_path, pairs):
    """Other training pairs binarised with the run's dictionary (as many as the run's 600,
    or fewer), their feature file built: the saved batch plan names pairs by id, so the
    resume stops before training with both datasets' identities and the fix; with
    --reset-dataloader (the fix) it trains on the new data."""
    from utils import write_parallel

    raw, other = tmp_path / "raw", tmp_path / "other-bin"
    write_parallel(raw, "train", pairs, seed=7)
    write_parallel(raw, "valid", 60, seed=8)
    run(["fairseq-preprocess", "--source-lang", "src", "--target-lang", "tgt", "--trainpref",
         raw / "train", "--validpref", raw / "valid", "--destdir", other, "--srcdict",
         tiny_data / "dict.src.txt", "--tgtdict", tiny_data / "dict.tgt.txt", "--workers", "1"])
    run(["autoassist-features", other, "--source-lang", "src", "--target-lang", "tgt"])
    assert (other / "dict.src.txt").read_text() == (tiny_data / "dict.src.txt").read_text()
    save_dir = _copy_checkpoint(tiny_checkpoint, tmp_path)
    proc, output = _resume(other, save_dir)
    assert proc.returncode != 0, output[-3000:]
    assert re.search(r"the checkpoint was saved on other training data \(600 pairs, fingerprint "
                     r"[0-9a-f]{12}\) than this run's \(" + str(pairs) + r" pairs, fingerprint "
                     r"[0-9a-f]{12}\): its batch plan and Assistant name that data's pairs by "
                     r"id, so a resume here would train other pairs than planned. To train this "
                     r"model on the new data, resume with --reset-dataloader \(a new Assistant "
                     r"and batch plan; the model and optimizer go on\), or give --data the data "
                     r"the checkpoint was saved on", output), output[-3000:]
    assert "| train_inner |" not in output
    proc, output = _resume(other, save_dir, "--reset-dataloader", check=True)
    assert "AutoAssist data pass 1 (shard 0)" in output and "num_updates 6" in output
    assert "resuming the batch stream" not in output  # a new plan, on the new data


def test_a_mid_pass_resume_on_another_number_of_workers_stops_with_the_reason(
        tiny_checkpoint, tiny_data, tmp_path):
    """A checkpoint of 1 worker, saved in the middle of a data pass, resumed by 2 gloo
    workers (scripts/launch_cpu_workers.py): its plan covers the rest of the pass on one
    shard, which 2 workers cannot split without training some pairs twice and others not at
    all. The run stops before training with the reason and both ways out; with
    --reset-dataloader it trains on 2 workers."""
    from utils import run_cpu_workers

    save_dir = _copy_checkpoint(tiny_checkpoint, tmp_path)

    def two_workers(*extra):
        proc = run_cpu_workers(train_args(tiny_data, save_dir, extra=[
            "--max-update", "6", "--assistant-sync", *extra]), check=False)
        return proc, proc.stdout + proc.stderr

    proc, output = two_workers()
    assert proc.returncode != 0, output[-3000:]
    assert re.search(r"the checkpoint was saved by 1 worker in the middle of data pass \d+, "
                     r"and this run has 2: each worker's batch plan covers the rest of its own "
                     r"share of that pass, and 2 workers cannot go on from those plans without "
                     r"training some pairs twice and others not at all. Resume with 1 worker "
                     r"\(--distributed-world-size 1\), or with --reset-dataloader to change the "
                     r"number of workers now", output), output[-3000:]
    assert "| train_inner |" not in output
    proc, output = two_workers("--reset-dataloader")
    assert proc.returncode == 0, output[-3000:]
    assert "done training" in output and "num_updates 6" in output


def test_the_resume_check_names_only_checkpoints_that_fairseq_saved(tmp_path, caplog):
    """Beside a cut checkpoint_last.pt, the fix names the newest whole checkpoint of
    fairseq's saves, never evaluate.sh's checkpoint.avgN.pt (no training state) nor a .tmp;
    a whole checkpoint_last.pt with only such files newer than it resumes without the
    warning that a save was cut off."""
    import os
    from types import SimpleNamespace

    import torch

    from autoassist_fairseq.checkpoint_file import check_resume_checkpoint

    def saved(name, when, whole=True):
        path = tmp_path / name
        torch.save({"name": name}, path)
        if not whole:
            path.write_bytes(path.read_bytes()[:100])
        os.utime(path, (when, when))
        return path

    saved("checkpoint1.pt", 1000)
    saved("checkpoint_best.pt", 2000, whole=False)
    saved("checkpoint2.pt", 3000)
    last = saved("checkpoint_last.pt", 4000, whole=False)
    saved("checkpoint.avg5.pt", 5000)
    saved("checkpoint_last.pt.tmp", 6000)
    cfg = SimpleNamespace(save_dir=str(tmp_path), restore_file="checkpoint_last.pt")
    with pytest.raises(ValueError) as error:
        check_resume_checkpoint(cfg)
    assert f"the newest whole one beside it is {tmp_path}/checkpoint2.pt (" in str(error.value)
    saved("checkpoint_last.pt", 4000)
    caplog.set_level("WARNING")
    check_resume_checkpoint(cfg)  # newer: only the average and the .tmp
    assert "is older than" not in caplog.text
    os.utime(tmp_path / "checkpoint_best.pt", (4500, 4500))  # a save cut in its copies
    check_resume_checkpoint(cfg)
    assert f"is older than what the last save wrote before it: {tmp_path}/checkpoint_best.pt, " \
           "which is damaged (" in caplog.text, caplog.text
    assert "--restore-file" not in caplog.text  # no newer whole one to go on from
    assert last.exists()


# -- the replay of the probes (research/fault_replay.py): what it found ------------------------

def test_only_the_plugins_own_errors_lose_their_traceback(tmp_path):
    """Under fairseq-train the plugin's errors for the user print as one line; a bug (another
    exception type, or one raised inside a library) keeps its traceback."""
    from autoassist_fairseq import errors
    from autoassist_fairseq.features.store_files import load_array
    from autoassist_fairseq.transport.process import AssistantDied

    def raised(fn):
        try:
            fn()
        except BaseException as err:  # noqa: B902
            return err
        raise AssertionError("nothing raised")

    from autoassist_fairseq.transport.client import AssistantClient

    (tmp_path / "cut.npy").write_bytes(b"")
    (tmp_path / "text.npy").write_bytes(b"not an array")
    client = AssistantClient.__new__(AssistantClient)
    client.failure = None
    died = raised(lambda: client.stop_on_failure([None, "killed"]))
    assert isinstance(died, AssistantDied) and errors.raised_by_plugin(died)
    assert errors.raised_by_plugin(raised(lambda: load_array(str(tmp_path / "cut.npy"), "")))
    assert not errors.raised_by_plugin(raised(lambda: {}["key"]))  # a bug: KeyError
    numpys = raised(lambda: np.load(tmp_path / "text.npy"))  # raised inside numpy
    assert isinstance(numpys, ValueError) and not errors.raised_by_plugin(numpys)


def _short_write_of_indices(monkeypatch):
    """numpy's save of a feature file's indices fails as on a full disk: a short write,
    "N requested and M written", without an errno."""
    real = np.save

    def save(file, array, *args, **kwargs):
        if str(getattr(file, "name", file)).endswith(".indices.npy.tmp"):
            raise OSError("12624 requested and 992 written")
        return real(file, array, *args, **kwargs)

    monkeypatch.setattr(np, "save", save)


def test_a_full_disk_in_autoassist_filter_names_its_out_not_the_features_flags(data, tmp_path,
                                                                              monkeypatch,
                                                                              capsys):
    """numpy's short write on a full disk ("N requested and M written", no errno) while
    autoassist-filter builds OUT's features: the error says the disk is full and gives
    autoassist-filter's fix (--out), not autoassist-features' --prefix or the temporary
    folder the corpus was built in."""
    from autoassist_fairseq.tools.filter import cli_main as filter_main

    _short_write_of_indices(monkeypatch)
    out = tmp_path / "filtered"
    assert filter_main([str(data), "--out", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"autoassist-filter: error: writing {out} failed: "
                          f"{PREFIX}.indices.npy: No space left on device; "), err
    assert f"free space on the disk of {tmp_path}" in err and "--out on another disk" in err
    assert "--prefix" not in err and ".building" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data-bin"]


def test_features_name_a_short_write_as_a_full_disk(data, tmp_path, monkeypatch, caplog):
    _short_write_of_indices(monkeypatch)
    assert build.cli_main([str(data), "-s", "src", "-t", "tgt", "--prefix",
                           str(tmp_path / "f")]) == 1
    assert f"cannot write the feature file {tmp_path}/f.indices.npy: No space left on device " \
           "(a short write: 12624 requested and 992 written); the disk of" in caplog.text


def test_fairseq_train_without_a_batch_bound_names_the_flags_in_one_line(tiny_data, tmp_path):
    """fairseq-train without --max-tokens or --batch-size: fairseq's own assert, after the
    plugin is imported, prints as one error line naming both flags, not its traceback."""
    args = train_args(tiny_data, tmp_path / "ckpt")
    at = args.index("--max-tokens")
    proc = run(args[:at] + args[at + 2:], check=False)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert proc.stderr.rstrip().splitlines()[-1] == (
        "fairseq-train: error: give --max-tokens N (the tokens a batch may hold, e.g. "
        "--max-tokens 4096) or --batch-size N (the sentences a batch may hold): fairseq-train "
        "needs a bound on each batch"), proc.stderr[-3000:]
    assert "Traceback" not in proc.stdout + proc.stderr


@pytest.mark.parametrize("case", ["data dir missing", "data dir is a file", "restore file missing",
                                  "max tokens below the longest pair"])
def test_a_new_users_mistakes_with_fairseq_train_stop_in_one_line(tiny_data, tmp_path, case):
    """What the replay of the probes found: a missing data folder (fairseq: a bare errno from
    os.listdir), a --restore-file that is not there (fairseq: a fresh start, without a word)
    and a --max-tokens below the longest pair (fairseq: an assert in its batching) each stop
    before training with one line naming the path or flag and the fix."""
    data, extra = tiny_data, ["--max-update", "3", "--assistant-sync"]
    if case == "data dir missing":
        data = tmp_path / "nowhere"
        expected = f"the data directory {data} (fairseq-train's first argument) does not exist: " \
                   "give the folder that fairseq-preprocess or scripts/prepare-corpus.sh wrote"
    elif case == "data dir is a file":
        data = tmp_path / "file"
        data.write_text("x\n")
        expected = f"the data directory {data} (fairseq-train's first argument) is a file, not " \
                   "a folder: give the folder"
    elif case == "restore file missing":
        extra += ["--restore-file", tmp_path / "typo.pt"]
        expected = f"--restore-file {tmp_path / 'typo.pt'} does not exist: fairseq-train would " \
                   "start the run afresh, without a word; give the path of a checkpoint file"
    else:
        extra += ["--max-tokens", "8"]  # after train_args' own: the last one counts
        expected = "--max-tokens 8 is below the longest pair of the valid split ("
    proc = run(train_args(data, tmp_path / "ckpt", extra=extra), check=False)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output[-3000:]
    last = proc.stderr.rstrip().splitlines()[-1]
    assert last.startswith("fairseq-train: error: " + expected), output[-3000:]
    assert "Traceback" not in output and "| train_inner |" not in output, output[-3000:]
    assert not (tmp_path / "ckpt" / "checkpoint_last.pt").exists()
    if case == "max tokens below the longest pair":
        assert "Give --max-tokens" in last and "--skip-invalid-size-inputs-valid-test" in last


def test_an_empty_or_missing_data_folder_names_the_fix(tmp_path, capsys, caplog):
    """autoassist-features on an empty folder (it said "dictionary not found ... check
    --source-lang", as for another language pair), autoassist-filter on a missing one (a
    bare errno)."""
    from autoassist_fairseq.tools.filter import cli_main as filter_main

    empty = tmp_path / "empty"
    empty.mkdir()
    assert build.cli_main([str(empty), "-s", "src", "-t", "tgt"]) == 1
    assert f"{empty} holds no fairseq-preprocess output (no dict.*.txt): give the --destdir " \
           "of fairseq-preprocess" in caplog.text
    assert list(empty.iterdir()) == []
    assert filter_main([str(tmp_path / "nowhere"), "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert f"autoassist-filter: error: DATA {tmp_path / 'nowhere'} does not exist: give the " \
           "data directory that scripts/prepare-corpus.sh" in err, err
    assert not (tmp_path / "out").exists()
