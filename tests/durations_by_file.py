"""Per-file test durations from a pytest JUnit XML report (``--junitxml``), longest first:
the figures of docs/test-durations.md. Usage: python tests/durations_by_file.py REPORT.xml"""

import sys
import xml.etree.ElementTree as ET
from collections import defaultdict


def by_file(report):
    seconds, tests = defaultdict(float), defaultdict(int)
    for case in ET.parse(report).getroot().iter("testcase"):
        name = case.get("classname", "").split(".")[-1] + ".py"
        seconds[name] += float(case.get("time", 0))
        tests[name] += 1
    return sorted(((s, tests[f], f) for f, s in seconds.items()), reverse=True)


if __name__ == "__main__":
    rows = by_file(sys.argv[1])
    for s, n, f in rows:
        print(f"{f}\t{n}\t{s:.1f}")
    print(f"total\t{sum(n for _, n, _ in rows)}\t{sum(s for s, _, _ in rows):.1f}")
