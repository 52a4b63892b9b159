"""How many Python processes a test run started, and how long they lived, by command and by
test file, from the log of tests/start_log/sitecustomize.py:

    AUTOASSIST_START_LOG=$PWD/starts.log PYTHONPATH=tests/start_log bash scripts/test.sh
    python tests/process_starts.py starts.log

A command is named by its program (a console script, a ``python -m`` module or a script
file); "from the tests" counts those whose parent is a pytest worker, the others were
started by a command (a shell script, a research tool, the CPU launcher)."""

import sys
from collections import Counter


def program(argv):
    words = argv.split()
    if not words:
        return "?"
    name = words[0].rsplit("/", 1)[-1]
    return words[0].rsplit("/", 2)[-2] if name == "__main__.py" else name


def summary(path):
    rows = [line.rstrip("\n").split("\t") for line in open(path)]
    workers = {pid for _, _, pid, _, _, argv in rows if argv.startswith("-c")}  # xdist workers
    count, seconds = Counter(), Counter()
    for _, alive, _, parent, _, argv in rows:
        if argv.startswith("-c") and parent not in workers or program(argv) == "pytest":
            continue  # the suite's own processes
        key = (program(argv), "from the tests" if parent in workers else "from a command")
        count[key] += 1
        seconds[key] += float(alive)
    files = Counter(test.split("::")[0].rsplit("/", 1)[-1] for _, _, _, _, test, _ in rows)
    return count, seconds, files


if __name__ == "__main__":
    count, seconds, files = summary(sys.argv[1])
    print("processes\tseconds alive\tprogram\tstarted")
    for key, n in sorted(count.items(), key=lambda kv: -seconds[kv[0]]):
        print(f"{n}\t{seconds[key]:.1f}\t{key[0]}\t{key[1]}")
    print(f"total\t{sum(count.values())}")
    print("\nprocesses per test file")
    for name, n in files.most_common():
        print(f"{n}\t{name}")
