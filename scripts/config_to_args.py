#!/usr/bin/env python3
"""Write the plain ``fairseq-train`` flags equivalent to a hydra YAML config of configs/.

    python scripts/config_to_args.py configs/multi30k/transformer_small.yaml   # -> stdout
    python scripts/config_to_args.py --write configs/*/*.yaml                  # -> *.args

The ``.args`` files hold one flag (and its value) per line, values without spaces,
``#`` comments; the scripts use them as ``fairseq-train DATA $(args of the file)``
(see :func:`read_args`, or ``scripts/_common.sh``'s ``read_args``). The data directory
(``task.data``) is not among them; ``common.user_dir`` is written as the value its
``${oc.env:AUTOASSIST_USER_DIR,default}`` interpolation takes without the variable
(``autoassist_fairseq``: run from the repository root, or replace it).
``tests/test_configs.py`` checks that every .args file parses to the same fairseq
configuration as its YAML.
"""

import argparse
import os
import re
import sys
from typing import List

import yaml

# the config groups whose _name selects a component, and the flag that does it
_NAME_FLAGS = {"task": "--task", "model": "--arch", "criterion": "--criterion",
               "optimizer": "--optimizer", "lr_scheduler": "--lr-scheduler"}
_GROUPS = ("common", "task", "model", "criterion", "optimizer", "lr_scheduler",
           "optimization", "dataset", "checkpoint", "distributed_training", "generation")
_ENV_DEFAULT = re.compile(r"^\$\{oc\.env:[A-Za-z_][A-Za-z0-9_]*,(.*)\}$")


def _value(value) -> str:
    if isinstance(value, list):
        return ",".join(_value(v) for v in value)
    if isinstance(value, float):
        return repr(value)
    text = str(value)
    m = _ENV_DEFAULT.match(text)
    if m:
        text = m.group(1)
    if not text or any(c.isspace() for c in text):
        raise ValueError(f"value {value!r} cannot be written without spaces")
    return text


def config_to_args(path: str) -> List[str]:
    with open(path, encoding="utf-8") as f:
        cfg = yaml.safe_load(f)
    lines = []
    for group in _GROUPS:
        for key, value in (cfg.get(group) or {}).items():
            if key == "_name":
                lines.append(f"{_NAME_FLAGS[group]} {value}")
                continue
            if group == "task" and key == "data":
                continue  # the positional data directory
            if group == "model" and key == "criterion":
                continue  # a copy of criterion._name that some legacy models read
            flag = "--" + key.replace("_", "-")
            if value is True:
                lines.append(flag)
            elif value is False or value is None:
                continue  # fairseq's store_true flags default to off
            else:
                lines.append(f"{flag} {_value(value)}")
    unknown = set(cfg) - set(_GROUPS) - {"defaults", "hydra"}
    if unknown:
        raise ValueError(f"{path}: config groups not handled: {sorted(unknown)}")
    return lines


def read_args(path: str) -> List[str]:
    """The argument list of an .args file (comments and blank lines dropped)."""
    args = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                args.extend(line.split())
    return args


def render(path: str) -> str:
    name = os.path.basename(path)
    header = (f"# fairseq-train DATA_DIR <these flags>: the equivalent of {name}.\n"
              f"# Written by scripts/config_to_args.py from {name}; edit the YAML and rerun it.\n"
              "# One flag (with its value) per line; --user-dir is relative to the repository root.\n")
    return header + "\n".join(config_to_args(path)) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example:\n  python scripts/config_to_args.py --write configs/*/*.yaml")
    parser.add_argument("configs", nargs="+", help="hydra YAML config files of configs/")
    parser.add_argument("--write", action="store_true",
                        help="write CONFIG.args next to each CONFIG.yaml instead of printing")
    args = parser.parse_args(argv)
    for path in args.configs:
        text = render(path)
        if args.write:
            out = os.path.splitext(path)[0] + ".args"
            with open(out, "w", encoding="utf-8") as f:
                f.write(text)
            print(f"wrote {out}")
        else:
            sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
