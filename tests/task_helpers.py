"""The autoassist_translation task as fairseq-train sets it up, in the test's process."""

from utils import USER_DIR


def fairseq_task(data, *extra):
    """``tasks.setup_task`` after fairseq's own argument parsing (user dir, defaults)."""
    from fairseq import options, tasks, utils
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    args = options.parse_args_and_arch(options.get_training_parser(), [
        str(data), "--user-dir", USER_DIR, "--task", "autoassist_translation", "--arch",
        "transformer", "--max-tokens", "600", "--cpu", *extra])
    cfg = convert_namespace_to_omegaconf(args)
    utils.import_user_module(cfg.common)
    return tasks.setup_task(cfg.task)


def task_config(*flags):
    """The task's config as fairseq's parser makes it from *flags* (no data is read)."""
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    args = options.parse_args_and_arch(options.get_training_parser(), [
        "data", "--user-dir", USER_DIR, "--task", "autoassist_translation", "--arch",
        "transformer", "--max-tokens", "100", *flags])
    return convert_namespace_to_omegaconf(args).task
