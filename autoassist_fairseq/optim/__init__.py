# Learning-rate schedulers, registered with fairseq's --lr-scheduler registry on import
# (as fairseq's own optim/lr_scheduler/ modules are), so --user-dir makes them available.
from . import rex_schedule  # noqa: F401
