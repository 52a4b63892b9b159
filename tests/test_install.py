"""A non-editable install works without the checkout: ``pip install`` of the package into a
fresh venv, then every console script of setup.py answers ``--help`` and runs its main path
on a tiny corpus, from a folder outside the repository.

The fresh venv holds the package alone. The dependencies (fairseq, torch, scikit-learn, ...)
come from the venv running the tests through a ``.pth`` file naming a folder of links to its
site-packages, less this project's own entries (its dist-info, the editable install's finder)
and the ``.pth`` files (the editable install's among them; Python runs none in a folder that a
``.pth`` names): installing the dependencies again would take minutes and prove nothing about
the package. Subprocesses run without PYTHONPATH and outside the repository, so that only the
installed copy can be imported; the test asserts that it is the one found.

``autoassist-diagnose`` answers ``--help`` only: its main path needs a trained checkpoint,
which no cheap fixture provides (tests/test_diagnose.py runs it on the 400 updates of the
``paper_run`` fixture).
"""

import gzip
import json
import os
import re
import shutil
import site
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from utils import run, write_parallel

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
# this project's entries in a site-packages folder: left out of the dependencies' folder
OWN_ENTRY = re.compile(r"^(__editable__|autoassist[_-]fairseq)|\.(pth|egg-link)$")
LETTERS = "abcdefghijklmnopqrstuvwxyz"
# the toy languages' random words are no language py3langid knows: the langid check is left
# out where a command would otherwise run it
CHECKS = "language,unrelated,digits"


def console_scripts():
    """setup.py's console scripts: name -> ``module:function``."""
    text = (REPO / "setup.py").read_text()
    return dict(re.findall(r'"([\w-]+) = ([\w.]+:\w+)"', text))


def dependencies_folder(root: Path) -> Path:
    """A folder of links to every entry of this interpreter's site-packages but this
    project's own."""
    deps = root / "deps"
    deps.mkdir()
    for packages in site.getsitepackages():
        for entry in Path(packages).iterdir():
            if not OWN_ENTRY.search(entry.name) and not (deps / entry.name).exists():
                (deps / entry.name).symlink_to(entry)
    return deps


def fresh_install(root: Path) -> Path:
    """A venv at root/venv with a non-editable install of a copy of the package's sources;
    returns its python."""
    src = root / "src"
    shutil.copytree(REPO / "autoassist_fairseq", src / "autoassist_fairseq",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("setup.py", "README.md"):
        shutil.copy(REPO / name, src / name)
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()"
                              "['purelib'])"], check=True, capture_output=True,
                             text=True).stdout.strip()
    Path(purelib, "autoassist-test-deps.pth").write_text(f"{dependencies_folder(root)}\n")
    proc = subprocess.run([python, "-m", "pip", "install", "--no-deps", "--no-build-isolation",
                           "--no-index", "--quiet", src], cwd=root, env=clean_env(venv),
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return python


def clean_env(venv: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(VIRTUAL_ENV=str(venv), PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
               OMP_NUM_THREADS="1", PYTHONNOUSERSITE="1")
    return env


def toy_pairs(rng, n, en, de):
    """*n* pairs of a toy language pair: each "en" word has its "de" word."""
    pairs = []
    for _ in range(n):
        words = rng.integers(0, len(en), size=rng.integers(4, 12))
        pairs.append((" ".join(en[w] for w in words), " ".join(de[w] for w in words)))
    return pairs


def write_inputs(root: Path) -> dict:
    """The commands' inputs: raw pairs in TSV, a clean corpus, a labelled file, and a
    binarised toy corpus (by the tests' fairseq-preprocess: binarising is fairseq's part, not
    the package's)."""
    rng = np.random.default_rng(0)
    en, de = ([("".join(rng.choice(list(LETTERS), size=rng.integers(3, 8)))) for _ in range(80)]
              for _ in range(2))
    tsv = root / "pairs.tsv"
    pairs = toy_pairs(rng, 400, en, de)
    tsv.write_text("".join(f"{s}\t{t}\n" for s, t in pairs), encoding="utf-8")
    clean = toy_pairs(rng, 300, en, de)
    for lang, side in (("en", 0), ("de", 1)):
        (root / f"clean.{lang}").write_text("".join(p[side] + "\n" for p in clean))
    labelled = root / "labelled.tsv.gz"
    rows = [(s, t, "V") for s, t in toy_pairs(rng, 40, en, de)]
    rows += [(s, pairs[i][1], "A") for i, (s, _) in enumerate(toy_pairs(rng, 20, en, de))]
    with gzip.open(labelled, "wt", encoding="utf-8") as f:
        f.write("en\tde\tlabel\n" + "".join(f"{s}\t{t}\t{label}\n" for s, t, label in rows))
    raw, data = root / "raw", root / "data-bin"
    write_parallel(raw, "train", 300, seed=0)
    write_parallel(raw, "valid", 30, seed=1)
    run(["fairseq-preprocess", "--source-lang", "src", "--target-lang", "tgt", "--trainpref",
         raw / "train", "--validpref", raw / "valid", "--destdir", data, "--joined-dictionary",
         "--workers", "1"])
    return dict(data=data, tsv=tsv, clean=root / "clean", labelled=labelled)


def test_installed_package_runs_every_console_script_outside_the_checkout(tmp_path):
    start = time.monotonic()
    assert REPO not in tmp_path.resolve().parents
    python = fresh_install(tmp_path)
    venv = python.parent.parent
    env = clean_env(venv)
    outside = tmp_path / "outside"
    (outside / "work").mkdir(parents=True)

    # the package found is the installed copy, with its data files; nothing of the checkout
    found = subprocess.run(
        [python, "-c", "import importlib.util as u; print(u.find_spec('autoassist_fairseq')"
         ".origin); print(u.find_spec('autoassist_fairseq.prepare.clean_corpus').origin)"],
        cwd=outside, env=env, check=True, capture_output=True, text=True).stdout.split()
    for origin in map(Path, found):
        assert venv in origin.parents and REPO not in origin.parents, origin
    package = Path(found[0]).parent
    assert list((package / "tools" / "opuscleaner").glob("*.json"))

    scripts = console_scripts()
    assert set(scripts) == {"autoassist-features", "autoassist-diagnose", "autoassist-filter",
                            "autoassist-check-report", "autoassist-score-pairs"}
    for name in scripts:
        assert (venv / "bin" / name).is_file(), f"{name} was not installed"

    started = []

    def launch(name, *args):
        started.append(subprocess.Popen([venv / "bin" / name, *map(str, args)], cwd=outside,
                                        env=env, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True))
        return started[-1]

    def finish(proc, what):
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, f"{what} failed ({proc.returncode}):\n{out[-4000:]}"
        return out

    try:
        # each command imports fairseq and torch, seconds of a core: the --help runs go
        # together while the inputs are written, the main paths in two lanes
        helps = [(name, launch(name, "--help")) for name in scripts]
        inputs = write_inputs(tmp_path)
        for name, proc in helps:
            assert finish(proc, f"{name} --help").startswith("usage:")

        data, scored = inputs["data"], outside / "scored.tsv"
        lanes = [
            [("autoassist-features", data, "--source-lang", "src", "--target-lang", "tgt",
              "--pair-checks", CHECKS),
             ("autoassist-filter", data, "--out", outside / "filtered")],
            [("autoassist-score-pairs", inputs["tsv"], "--src", "en", "--tgt", "de", "--out",
              scored, "--bpe-size", "300", "--pair-checks", CHECKS + ",script", "--quiet"),
             ("autoassist-check-report", inputs["labelled"], "--clean", inputs["clean"], "--src",
              "en", "--tgt", "de", "--out", outside / "report.json", "--share", "0.2",
              "--bpe-size", "300", "--workdir", outside / "work", "--pair-checks", CHECKS,
              "--bootstrap", "0", "--no-opusfilter")],
        ]
        for step in range(2):
            running = [(lane[step], launch(*lane[step])) for lane in lanes]
            for command, proc in running:
                finish(proc, " ".join(map(str, command)))
    finally:  # a failed command leaves none of the others running
        for proc in started:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()

    assert (data / "train.src-tgt.autoassist.json").is_file()
    assert sorted(p.name for p in (outside / "filtered").glob("train.src-tgt.*.bin"))
    # each pair, its four checks' scores, the union's score and the flag
    assert [len(line.split("\t")) for line in scored.read_text(encoding="utf-8").splitlines()] \
        == [2 + 4 + 2] * 400
    report = json.loads((outside / "report.json").read_text())
    assert report["pairs"]["labelled"] == 60  # with clean pairs at the share asked for
    print(f"install test: {time.monotonic() - start:.1f} s")
