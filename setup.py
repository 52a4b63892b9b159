"""autoassist-fairseq: AutoAssist (Zhang, Yu & Dhillon, NeurIPS 2019) as a fairseq plugin."""

from setuptools import find_packages, setup

setup(
    name="autoassist-fairseq",
    version="0.2.0",
    description=(
        "A CPU Assistant that learns which sentence pairs the fairseq Boss model still "
        "learns from, and leaves the easy ones out of its batches"
    ),
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="MIT",
    python_requires=">=3.8",
    packages=find_packages(include=["autoassist_fairseq", "autoassist_fairseq.*"]),
    # the OpusCleaner filter definition (autoassist_fairseq/tools/opuscleaner/*.json)
    package_data={"autoassist_fairseq.tools": ["opuscleaner/*.json"]},
    install_requires=[
        # Both distributions provide the same `fairseq` module; the official 0.12.2
        # fails at import on Python >= 3.11 (dataclass mutable-default error).
        "fairseq==0.12.2; python_version < '3.11'",
        "fairseq-fixed==0.12.3.1; python_version >= '3.11'",
        # Any torch that fairseq accepts; scripts/ install torch==2.13.0 (CPU) first so
        # that pip never resolves a CUDA build on CPU machines.
        "torch",
        "numpy",
        "scipy",
        "scikit-learn",
        "threadpoolctl",  # the Assistant process keeps BLAS to one thread
        "setproctitle",  # names the Assistant and loader processes in ps/top
        "sacrebleu>=2.0",
        "sentencepiece",
        # the langid check (a default check; elsewhere autoassist-features asks for it or for
        # --pair-checks without langid): a pretrained identifier whose model ships in the wheel
        "py3langid==0.4.0; python_version >= '3.10'",
        "tqdm",
    ],
    extras_require={
        # pytest-xdist: scripts/test.sh runs the suite on every core (3.8: --no-loadscope-reorder)
        "test": ["pytest", "pytest-xdist>=3.8"],
        "plot": ["matplotlib"],
        # --tensorboard-logdir: fairseq writes through torch.utils.tensorboard (needs
        # tensorboard); tensorboardX is what fairseq's text_to_speech task imports,
        # whose absence prints "Please install tensorboardX" at every fairseq import
        "tensorboard": ["tensorboard", "tensorboardX"],
        # the OpusFilter filter (autoassist_fairseq.tools.opusfilter_filter) and its test
        "opusfilter": ["opusfilter"],
    },
    entry_points={
        "console_scripts": [
            "autoassist-features = autoassist_fairseq.features.build:cli_main",
            "autoassist-diagnose = autoassist_fairseq.diagnose:cli_main",
            "autoassist-check-report = autoassist_fairseq.tools.check_report:cli_main",
            "autoassist-filter = autoassist_fairseq.tools.filter:cli_main",
            "autoassist-score-pairs = autoassist_fairseq.tools.score_pairs:cli_main",
        ],
    },
)
