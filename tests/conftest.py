import re
from pathlib import Path
from types import SimpleNamespace

# before any test module imports the package: the package registers with fairseq on import
# only where fairseq is imported already (as under fairseq-train --user-dir), and the tests
# that parse fairseq-train's flags in this process (--user-dir, --task autoassist_translation,
# --lr-scheduler rex) need it registered. tests/test_layout.py checks the other order.
import fairseq  # noqa: F401
import pytest

from scripts_helpers import make_synthetic_data
from utils import RANDOM_SKIP, make_binarized, run, train_args


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory):
    """A 600-pair binarised toy corpus with its feature file."""
    return make_binarized(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="session")
def train_data(tmp_path_factory):
    """A 2000-pair toy corpus: enough for a few hundred updates of a tiny Boss."""
    return make_binarized(tmp_path_factory.mktemp("train"), n_train=2000, n_valid=100)


@pytest.fixture(scope="session")
def big_data(tmp_path_factory):
    """A 6000-pair toy corpus: one window of the default size (4096 candidates) pickles to
    more than a pipe's buffer, as on real data."""
    return make_binarized(tmp_path_factory.mktemp("big"), n_train=6000, n_valid=60)


@pytest.fixture(scope="session")
def synthetic_data(tmp_path_factory):
    """A 300-pair synthetic corpus prepared by scripts/prepare-corpus.sh (src -> tgt, a
    sentencepiece model of 300 pieces): its data directory, with raw/ references."""
    return make_synthetic_data(tmp_path_factory.mktemp("synthetic"), pairs=300, bpe_size=300)


# -- training runs that several tests read (read-only: a test that needs to change a run's
# files copies them). Each is trained once per session (per xdist worker: conftest's
# pytest_collection_modifyitems keeps the tests of one run on one worker).

@pytest.fixture(scope="session")
def paper_run(train_data, tmp_path_factory):
    """400 updates of the tiny transformer on train_data with the paper's rule alone, the
    one that skips easy (low-loss) pairs, in the deterministic mode (what the Assistant has
    learned at each window does not depend on the machine's load), every trained batch
    traced in ``save_dir / "trace"``: ``(save_dir, process)``."""
    save_dir = tmp_path_factory.mktemp("paper-run")
    proc = run(train_args(train_data, save_dir, extra=[
        "--max-update", "400", "--assistant-rule", "paper", "--assistant-pair-checks", "off",
        "--assistant-sync", "--assistant-trace-dir", save_dir / "trace"]))
    return save_dir, proc


@pytest.fixture(scope="session")
def random_skip_run(train_data, tmp_path_factory):
    """6 epochs on train_data with the random rule at known rates (every pair in pass 1,
    60% of every later pass), no loader workers and no buffer, every trained batch traced
    (``trace``: the directory for utils.read_trace). Acceptance does not depend on the
    Assistant's state, so a run of the same flags that stops earlier (``--max-epoch 3``)
    trains exactly the first epochs of this one: the uninterrupted plan that resumed and
    background-loaded runs are compared with."""
    root = tmp_path_factory.mktemp("random-skip")
    proc = run(train_args(train_data, root / "ckpt", extra=[
        "--max-epoch", "6", "--assistant-trace-dir", root / "trace", *RANDOM_SKIP,
        "--num-workers", "0", "--data-buffer-size", "0"]))
    return SimpleNamespace(save_dir=root / "ckpt", trace=root / "trace", stdout=proc.stdout,
                           output=proc.stdout + proc.stderr)


# -- distribution over pytest-xdist workers (scripts/test.sh: -n auto --dist loadfile) -----
# Each test file runs whole on one worker (its module fixtures are built once), and the
# files that read the same session run, or the same prepared corpus, go to the same worker
# (the run is trained, the corpus prepared, once per worker that needs it). Groups go out
# longest first, so that no long group is left to start last while the other worker idles;
# the durations behind this order are in docs/test-durations.md.
SHARED_RUNS = ("paper_run", "random_skip_run")
SHARED_FIXTURES = SHARED_RUNS + ("synthetic_data",)  # prepare-corpus.sh: ~20 s a worker
LONGEST_FIRST = ("test_task_train.py", "test_benchmark.py", "test_prepare.py",
                 "test_gpu_check.py", "test_distributed.py", "test_evaluate.py",
                 "test_benchmark_arms.py", "test_fixed_budget.py", "test_process.py",
                 "test_configs.py", "test_faults.py")

# the "slow" mark (-m "not slow": a quick lane while developing; CI runs everything): a
# test that reads a prepared corpus or a training run, or one of these, which train or
# prepare one themselves
SLOW_FIXTURES = ("tiny_data", "train_data", "big_data", "synthetic_data", "multi30k_slice",
                 "segmented")
SLOW_TESTS = ("test_features_command_flags_copies_and_training_skips_them",
              "test_prepare_wmt14_offline_on_the_sample")


def file_groups():
    """Test file name -> the name of its group: the files whose source names one of the
    SHARED_FIXTURES are one group (read from the source, so that the xdist controller,
    which collects no tests, groups as the workers do)."""
    parent = {}

    def find(key):
        while parent.setdefault(key, key) != key:
            key = parent[key]
        return key

    names = sorted(p.name for p in Path(__file__).parent.glob("test_*.py"))
    for name in names:
        text = (Path(__file__).parent / name).read_text()
        for fixture in SHARED_FIXTURES:
            if re.search(rf"\b{fixture}\b", text):
                parent[find(name)] = find(fixture)
    members = {}
    for name in names:
        members.setdefault(find(name), []).append(name)
    return {name: "+".join(members[find(name)]) for name in names}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """--dist loadfile, with the files of one group as one unit (see file_groups)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    groups = file_groups()

    class SharedRunScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            path = nodeid.split("::", 1)[0]
            return groups.get(path.rsplit("/", 1)[-1], path)

    return SharedRunScheduling(config, log)


def pytest_collection_modifyitems(config, items):
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if any(name in fixtures for name in SLOW_FIXTURES + SHARED_RUNS) \
                or item.name.split("[")[0] in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)
    groups = file_groups()

    def rank(item):
        name = item.nodeid.split("::", 1)[0].rsplit("/", 1)[-1]
        return min((LONGEST_FIRST.index(f) for f in groups.get(name, name).split("+")
                    if f in LONGEST_FIRST), default=len(LONGEST_FIRST))

    items.sort(key=rank)  # stable: the files of a group, and the tests of a file, keep their order
