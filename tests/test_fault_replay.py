"""research/fault_replay.py: its classifier, and its command runner's hang and orphan
checks (the replay itself takes minutes and is not part of the suite)."""

import sys

from research.fault_replay import Expect, Result, classify, run_command

TRACE = "Traceback (most recent call last):\n  File ...\nValueError: x\n"


def _result(code=1, output="", timed_out=False, orphans=()):
    return Result(["cmd"], code, output, 1.0, timed_out, list(orphans))


def test_the_classifier_tells_every_verdict_apart():
    refuse = Expect(error=True, names=["--flag"], fix=["give "])
    assert classify(_result(1, "error: --flag 7 is out of range: give 0..1"), refuse)[0] == "OK"
    assert classify(_result(1, TRACE + "--flag: give 1"), refuse)[0] == "CRASH"
    assert classify(_result(0, "done"), refuse)[0] == "SILENT WRONG"
    assert classify(_result(1, "error: bad value"), refuse)[0] == "POOR"  # no flag named
    assert classify(_result(1, "error: --flag is bad"), refuse)[0] == "POOR"  # no fix
    assert classify(_result(None, "", timed_out=True), refuse)[0] == "HANG"
    assert classify(_result(1, "--flag: give 1", orphans=["12: python"]), refuse)[0] == "ORPHAN"
    runs = Expect(error=False, says=["warned"])
    assert classify(_result(0, "warned"), runs)[0] == "OK"
    assert classify(_result(0, "quiet"), runs)[0] == "SILENT WRONG"
    assert classify(_result(0, "warned"), runs, ["a file changed"])[0] == "SILENT WRONG"
    assert classify(_result(2, "warned"), runs)[0] == "POOR"  # refused a valid command
    allowed = Expect(error=False, returncodes=(137,), traceback_ok="the other rank's own")
    assert classify(_result(137, TRACE), allowed)[0] == "OK"
    wrong = Expect(error=True, names=["--out"], fix=["give "], wrong=["--prefix"])
    assert classify(_result(1, "--out: give --prefix elsewhere"), wrong)[0] == "POOR"


def test_the_runner_finds_hangs_and_orphans():
    hang = run_command([sys.executable, "-c", "import time; time.sleep(30)"], timeout=1,
                       grace=1)
    assert hang.timed_out and not hang.orphans
    # a grandchild in a session of its own outlives its parent: found by the marker
    orphan = run_command([sys.executable, "-c",
                          "import subprocess, sys; subprocess.Popen([sys.executable, '-c', "
                          "'import time; time.sleep(30)'], start_new_session=True)"],
                         timeout=20, grace=1)
    assert orphan.returncode == 0 and len(orphan.orphans) == 1, orphan
    assert classify(orphan, Expect(error=False))[0] == "ORPHAN"


def test_a_replay_of_some_cases_updates_their_rows_only(tmp_path):
    import json

    from research.fault_replay import merge_rows

    table = tmp_path / "replay.json"
    table.write_text(json.dumps({"cases": [{"case": "a", "verdict": "CRASH"},
                                           {"case": "b", "verdict": "OK"}]}))
    merged = merge_rows(table, [{"case": "a", "verdict": "OK"}, {"case": "c", "verdict": "OK"}])
    assert [(r["case"], r["verdict"]) for r in merged] == [("a", "OK"), ("b", "OK"), ("c", "OK")]
