"""The hydra configs of configs/ compose, and fairseq builds their task and model.

Every ``configs/*/*.yaml`` is composed the way ``fairseq-hydra-train --config-dir ...
--config-name ...`` composes it; then the task is set up on a tiny synthetic data dir
(with AutoAssist features), the model, criterion, optimizer and lr scheduler are built,
and one forward/backward pass runs. The WMT-scale models are built with tiny sizes.
Every ``.args`` file must give the same fairseq configuration as its YAML, and be what
``scripts/config_to_args.py`` writes for it. No config names a language pair: fairseq
infers it from the data directory, and ``check_language_pair`` explains a mismatch.
"""

import sys
from pathlib import Path

import pytest
import yaml

from scripts_helpers import CONFIGS, REPO, USER_DIR, autoassist_task_available, load_script, \
    make_synthetic_data, run

config_to_args = load_script("config_to_args")

YAMLS = sorted(CONFIGS.glob("*/*.yaml"))
IDS = [f"{p.parent.name}/{p.stem}" for p in YAMLS]

# sizes that make the WMT-scale models quick to build on a CPU
TINY = {
    "transformer": dict(encoder_layers=1, decoder_layers=1, encoder_embed_dim=32,
                        decoder_embed_dim=32, encoder_ffn_embed_dim=64, decoder_ffn_embed_dim=64,
                        encoder_attention_heads=2, decoder_attention_heads=2),
    "lstm": dict(encoder_embed_dim=32, encoder_hidden_size=32, decoder_embed_dim=32,
                 decoder_hidden_size=32, decoder_out_embed_dim=32),
    "fconv": dict(encoder_embed_dim=32, decoder_embed_dim=32, decoder_out_embed_dim=32,
                  encoder_layers="[(32, 3)] * 2", decoder_layers="[(32, 3)] * 2"),
}


@pytest.fixture(scope="module")
def data_dir(synthetic_data):
    return synthetic_data  # conftest: make_synthetic_data(..., pairs=300, bpe_size=300)


@pytest.fixture
def task_name():
    return "autoassist_translation" if autoassist_task_available() else "translation"


def yaml_items(path):
    """(group, key, value) of every setting of a YAML config, hydra's own excluded."""
    with open(path) as f:
        cfg = yaml.safe_load(f)
    for group, settings in cfg.items():
        if group in ("defaults", "hydra"):
            continue
        for key, value in settings.items():
            yield group, key, value


def compose(path, overrides=()):
    """The config fairseq-hydra-train would run (fairseq_cli.hydra_train, minus training)."""
    from fairseq.dataclass.initialize import add_defaults, hydra_init
    from fairseq.dataclass.utils import omegaconf_no_object_check
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    hydra_init(path.stem)
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(path.parent), version_base="1.1"):
        cfg = hydra_compose(config_name=path.stem, overrides=list(overrides))
    add_defaults(cfg)
    with omegaconf_no_object_check():
        cfg = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True, enum_to_str=True))
    OmegaConf.set_struct(cfg, True)
    return cfg


def plain(value):
    from omegaconf import OmegaConf

    return OmegaConf.to_container(value) if OmegaConf.is_config(value) else value


@pytest.mark.parametrize("path", YAMLS, ids=IDS)
def test_yaml_builds_task_and_model(path, data_dir, task_name, monkeypatch):
    import torch
    from fairseq import optim, tasks, utils
    from fairseq.optim import lr_scheduler
    from omegaconf import open_dict

    monkeypatch.setenv("AUTOASSIST_USER_DIR", str(USER_DIR))
    cfg = compose(path, [f"task.data={data_dir}"])

    # the YAML's settings survive composition and fairseq's defaults
    for group, key, value in yaml_items(path):
        if group == "task" and key == "data":
            continue
        expected = str(USER_DIR) if (group, key) == ("common", "user_dir") else value
        assert plain(cfg[group][key]) == expected, f"{group}.{key}"
    assert cfg.task._name == "autoassist_translation"

    with open_dict(cfg):
        cfg.task._name = task_name
        cfg.common.fp16 = False
        cfg.common.cpu = True
        if path.parent.name == "wmt14_en_de":
            family = next(k for k in TINY if cfg.model._name.startswith(k))
            for key, value in TINY[family].items():
                cfg.model[key] = value

    # what fairseq_cli.train.main does before it builds anything
    from fairseq.dataclass.initialize import add_defaults

    utils.import_user_module(cfg.common)
    add_defaults(cfg)
    task = tasks.setup_task(cfg.task)
    # the pair comes from the data directory (src-tgt), not from the config
    assert (task.cfg.source_lang, task.cfg.target_lang) == ("src", "tgt")
    task.load_dataset("train")
    model = task.build_model(cfg.model)
    criterion = task.build_criterion(cfg.criterion)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = optim.build_optimizer(cfg.optimizer, params)
    lr_scheduler.build_lr_scheduler(cfg.lr_scheduler, optimizer)

    dataset = task.dataset("train")
    sample = dataset.collater([dataset[i] for i in range(4)])
    loss, sample_size, _ = criterion(model, sample)
    loss.backward()
    assert torch.isfinite(loss) and sample_size > 0


@pytest.mark.parametrize("path", YAMLS, ids=IDS)
def test_args_file_matches_yaml(path, data_dir, monkeypatch):
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    args_path = path.with_suffix(".args")
    assert args_path.exists(), f"missing {args_path}"
    assert args_path.read_text() == config_to_args.render(str(path)), \
        f"{args_path} is out of date: python scripts/config_to_args.py --write {path}"

    monkeypatch.chdir(REPO)  # --user-dir autoassist_fairseq is relative to the repo root
    argv = [str(data_dir)] + config_to_args.read_args(str(args_path))
    args = options.parse_args_and_arch(options.get_training_parser(), argv)
    cfg = convert_namespace_to_omegaconf(args)
    for group, key, value in yaml_items(path):
        if group == "task" and key == "data":
            continue
        if (group, key) == ("common", "user_dir"):
            assert Path(cfg.common.user_dir).resolve() == USER_DIR
            continue
        if (group, key) == ("model", "criterion"):  # see configs/*/lstm*.yaml
            actual = args.criterion
        elif group == "model":
            actual = args.arch if key == "_name" else getattr(args, key)
        else:
            actual = plain(cfg[group][key])
        assert actual == value, f"{args_path.name}: {group}.{key} = {actual!r}, YAML says {value!r}"


def test_hydra_train_cli_runs_demo_config(data_dir, tmp_path):
    """fairseq-hydra-train --config-dir/--config-name really trains with a config."""
    save_dir = tmp_path / "ckpt"
    env_overrides = {"AUTOASSIST_USER_DIR": str(USER_DIR)}
    from scripts_helpers import script_env

    env = script_env()
    env.update(env_overrides)
    task = "autoassist_translation" if autoassist_task_available() else "translation"
    proc = run([Path(sys.executable).parent / "fairseq-hydra-train",
                "--config-dir", CONFIGS / "demo", "--config-name", "transformer_tiny",
                f"task.data={data_dir}", f"task._name={task}",
                f"checkpoint.save_dir={save_dir}", "optimization.max_update=2",
                "optimization.max_epoch=1"], cwd=tmp_path, env=env, timeout=300)
    out = proc.stdout + proc.stderr
    assert "done training" in out
    assert (save_dir / "checkpoint_last.pt").exists()
    assert not (tmp_path / ".hydra").exists() and not (tmp_path / "hydra_train.log").exists()


@pytest.mark.parametrize("path", YAMLS, ids=IDS)
def test_config_does_not_pin_the_language_pair(path):
    """A pair in a config breaks every other corpus (e.g. dict.de.txt on en-ja data)."""
    settings = {key for group, key, _ in yaml_items(path) if group == "task"}
    assert not settings & {"source_lang", "target_lang"}, f"{path} names a language pair"
    flags = config_to_args.read_args(str(path.with_suffix(".args")))
    assert not set(flags) & {"--source-lang", "--target-lang", "-s", "-t"}


def test_check_language_pair_names_the_pairs_and_the_fix(data_dir, tmp_path):
    from autoassist_fairseq.tasks.data_checks import check_language_pair, language_pairs

    assert language_pairs(data_dir) == [("src", "tgt")]
    # the pair of the data, or none given (fairseq infers it): nothing to report
    check_language_pair(str(data_dir), "src", "tgt")
    check_language_pair(str(data_dir), None, None)
    check_language_pair(str(data_dir), "tgt", "src")  # the reverse direction uses the same dicts

    with pytest.raises(FileNotFoundError) as e:
        check_language_pair(str(data_dir), "en", "de")
    msg = str(e.value)
    assert "dict.en.txt and dict.de.txt not found" in msg
    assert "Language pairs in that directory: src-tgt" in msg
    assert "drop --source-lang/--target-lang" in msg
    assert "--source-lang src --target-lang tgt" in msg

    with pytest.raises(FileNotFoundError, match=r"dict\.de\.txt not found"):
        check_language_pair(str(data_dir), "src", "de")
    # both sides one language: fairseq would end in "Dataset not found: valid"
    with pytest.raises(ValueError, match="both 'src'.*the data holds: src-tgt"):
        check_language_pair(str(data_dir), "src", "src")

    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="Language pairs in that directory: none"):
        check_language_pair(str(empty), "en", "de")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        check_language_pair(str(tmp_path / "missing"), "en", "de")


def test_check_language_pair_lists_every_pair(tmp_path):
    from autoassist_fairseq.tasks.data_checks import check_language_pair

    for name in ("train.en-ja.en.idx", "train.en-ja.ja.idx", "valid.de-en.de.idx",
                 "train.en-ja.autoassist.json", "train.kept-lines", "dict.en.txt"):
        (tmp_path / name).write_text("")
    with pytest.raises(FileNotFoundError) as e:
        check_language_pair(str(tmp_path), "en", "fr")
    assert "dict.fr.txt not found" in str(e.value) and "dict.en.txt" not in str(e.value)
    assert "Language pairs in that directory: de-en, en-ja." in str(e.value)
