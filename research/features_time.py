"""Time autoassist-features on one prepared corpus, for several code trees and check sets.

Each arm is a code tree (a checkout of this repository) and a ``--pair-checks`` value; the
arms run in turn, round after round, so that a change of the machine's load falls on all of
them. Per run: the build's own time (its log line "... in Xs", without the imports), the
wall and CPU time of the whole command, and the share of the machine's CPU that other
processes used meanwhile (/proc/stat).

    python -m research.features_time /tmp/news/data -s en -t de \\
        --code before=/work/wt/before --code after=. \\
        --pair-checks language,unrelated,digits,script \\
        --pair-checks language,unrelated,digits,script,langid --rounds 2 --out F.json

``--pair-checks default`` runs each tree's own default checks, so that code from before the
checks' options (whose command writes into its data folder: it gets a folder of links to
DATA's files) can be timed against today's.
"""

import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time

from research.bench import doc_parser
from research.bench.runs import cpu_share_of_others, machine_busy_seconds

_BUILD = re.compile(r"nonzeros in ([0-9.]+)s")


_THREADS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def build_command(tree: str, data: str, out: str, src: str, tgt: str, checks: str):
    """The ``autoassist-features`` command of the code in *tree*, writing under the folder
    *out*. *checks* ``default``: the tree's own default checks (no ``--pair-checks``). A tree
    whose command has no ``--prefix`` (before the checks' options: it writes into its data
    folder) builds in *out*, which is given links to DATA's files."""
    with open(os.path.join(tree, "autoassist_fairseq", "features", "build.py"),
              encoding="utf-8") as f:
        has_prefix = '"--prefix"' in f.read()
    if has_prefix:
        cmd = [data, "--prefix", os.path.join(out, "f")]
    else:
        for name in os.listdir(data):
            if name.endswith((".bin", ".idx", ".txt")):
                os.symlink(os.path.abspath(os.path.join(data, name)), os.path.join(out, name))
        cmd = [out]
    if checks != "default":
        cmd += ["--pair-checks", checks]
    return [sys.executable, "-m", "autoassist_fairseq.features.build", *cmd, "-s", src,
            "-t", tgt]


def time_build(tree: str, data: str, src: str, tgt: str, checks: str,
               threads: int = 0) -> dict:
    """One ``autoassist-features`` run of the code in *tree* (its folder first on the path);
    *threads* > 0 caps its BLAS threads."""
    with tempfile.TemporaryDirectory(prefix="aa-ftime-") as out:
        cmd = build_command(tree, data, out, src, tgt, checks)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        busy, wall = machine_busy_seconds(), time.perf_counter()
        env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
        if threads > 0:
            env.update({k: str(threads) for k in _THREADS})
        proc = subprocess.run(cmd, cwd=tree, capture_output=True, text=True, env=env)
        wall, busy = time.perf_counter() - wall, machine_busy_seconds() - busy
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} (in {tree}) failed:\n{proc.stderr[-2000:]}")
    found = _BUILD.findall(proc.stderr + proc.stdout)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"build_s": float(found[-1]) if found else None, "wall_s": round(wall, 2),
            "cpu_s": round(cpu, 2),
            "other_cpu_share": round(cpu_share_of_others(busy, cpu, wall, os.cpu_count()), 3)}


def main(argv=None):
    p = doc_parser(__doc__)
    p.add_argument("data", help="a prepared data directory (its train split)")
    p.add_argument("-s", "--source-lang", required=True, help="source language code of DATA")
    p.add_argument("-t", "--target-lang", required=True, help="target language code of DATA")
    p.add_argument("--code", action="append", default=[], metavar="NAME=DIR",
                   help="a code tree to time (repeatable; default: this checkout)")
    p.add_argument("--pair-checks", action="append", required=True,
                   help="a --pair-checks value to time (repeatable); 'default': each "
                        "tree's own default checks, also of code before the option")
    p.add_argument("--rounds", type=int, default=2, help="runs of each arm (default 2)")
    p.add_argument("--threads", type=int, default=0,
                   help="cap each run's BLAS threads (default: the libraries' own); 1 keeps "
                        "a run on one core beside other work")
    p.add_argument("--out", required=True, help="the JSON to write")
    a = p.parse_args(argv)
    if a.rounds < 1:
        p.error(f"--rounds {a.rounds}: give at least 1")
    trees = {}
    for spec in a.code or [f"this={os.getcwd()}"]:
        name, sep, tree = spec.partition("=")
        if not sep or not os.path.isdir(os.path.join(tree, "autoassist_fairseq")):
            p.error(f"--code {spec!r}: expected NAME=DIR, DIR a checkout of this repository")
        trees[name] = tree
    runs = {f"{name} {checks}": [] for name in trees for checks in a.pair_checks}
    for _ in range(a.rounds):
        for name, tree in trees.items():
            for checks in a.pair_checks:
                result = time_build(tree, a.data, a.source_lang, a.target_lang, checks,
                                    a.threads)
                runs[f"{name} {checks}"].append(result)
                print(name, checks, json.dumps(result), flush=True)
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump({"data": os.path.abspath(a.data), "cores": os.cpu_count(),
                   "threads": a.threads or None,
                   "code": {n: os.path.abspath(t) for n, t in trees.items()}, "runs": runs},
                  f, indent=1)


if __name__ == "__main__":
    main()
