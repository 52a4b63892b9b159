"""The research side of autoassist-fairseq: the equal-compute benchmark (``research.bench``)
and the command-line tools of the lab notebook (docs/benchmarks.md, docs/results/).

Not installed with the package (setup.py installs ``autoassist_fairseq`` only): run the
tools from the repository root, e.g. ``python -m research.bench --help``.
"""
