"""Helpers for the tests of scripts/ and configs/ (test_prepare, test_evaluate, test_configs)."""

import importlib.util
import os
import sys
from pathlib import Path

import warm
import warm_shims

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "scripts"
CONFIGS = REPO / "configs"
USER_DIR = REPO / "autoassist_fairseq"
SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
BIN = Path(sys.executable).parent


def load_script(name):
    """scripts/NAME.py as a module: scripts/ holds command-line tools, not a package, so the
    file is loaded from its path (nothing is added to sys.path)."""
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def script_env():
    """The environment for scripts: this interpreter's bin/ first on PATH."""
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHON"] = sys.executable
    # tiny models: one thread each is as fast, and much faster when the cores are busy
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def run(cmd, timeout=600, check=True, **kwargs):
    """Run a command (scripts with bash); on failure show its output."""
    cmd = [str(c) for c in cmd]
    env = kwargs.pop("env", script_env())
    if cmd[0].endswith(".sh"):  # its fairseq commands forked from a warm process
        cmd, env = ["bash"] + cmd, warm_shims.environment(env)
    proc = warm.run_command(cmd, timeout=timeout, env=env, **kwargs)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}):\n"
                             f"{proc.stdout[-5000:]}\n{proc.stderr[-5000:]}")
    return proc


def make_synthetic_data(root, pairs=300, bpe_size=300, seed=1):
    """A small synthetic corpus prepared by prepare-corpus.sh (src -> tgt); returns
    the data directory (fairseq data, raw references, features)."""
    root = Path(root)
    run([sys.executable, SCRIPTS / "make_synthetic_corpus.py", "--out", root / "raw",
         "--pairs", pairs, "--valid", 40, "--test", 30, "--seed", seed])
    run([SCRIPTS / "prepare-corpus.sh", "--src", "src", "--tgt", "tgt",
         "--train", root / "raw" / "train", "--valid", root / "raw" / "valid",
         "--test", root / "raw" / "test", "--out", root / "data", "--bpe-size", bpe_size])
    return root / "data"


def autoassist_task_available() -> bool:
    try:
        import autoassist_fairseq.tasks.autoassist_translation  # noqa: F401
    except ImportError:
        return False
    return True
