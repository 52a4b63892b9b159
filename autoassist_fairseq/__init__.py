"""autoassist-fairseq: AutoAssist (Zhang, Yu & Dhillon, NeurIPS 2019) for fairseq.

The data flow follows the folders: ``features`` -> ``assistant`` -> ``data`` (batches) ->
``tasks`` (the Boss's training step) -> ``losses`` -> back to ``assistant``.

With fairseq (``--user-dir autoassist_fairseq``, fairseq's own commands, any script that
imports fairseq), the package registers the ``autoassist_translation`` task and the ``rex``
learning-rate schedule (``optim``), and ``compat`` lets fairseq load its checkpoints on
torch >= 2.6. Without it, importing the package imports neither torch nor fairseq: the
commands that need neither (``autoassist-score-pairs``, ``autoassist-check-report``) start
in a second rather than 6, and the others import them where they use them.

When: on importing the package if fairseq is imported already; else once fairseq's import
ends, or, where that import came from a module of this package, once that module's import
ends (the task's modules import it: registering while it is half run would find it so).
``fairseq.utils.import_user_module`` (``--user-dir``) imports no package that is already
imported, so the package cannot wait for it.
"""

import importlib.abc
import importlib.machinery
import sys

# loaders that the path finder makes anew for each module: their exec_module can be wrapped
_OWN_LOADERS = (importlib.machinery.SourceFileLoader, importlib.machinery.SourcelessFileLoader,
                importlib.machinery.ExtensionFileLoader)


def _register() -> None:
    """Register with fairseq (once): the task, the ``rex`` schedule, compat's fixes."""
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _Registrar)]
    from . import compat  # noqa: F401
    from . import optim  # noqa: F401
    from . import tasks  # noqa: F401


def _importing(but: str) -> bool:
    """Whether a module of this package other than *but* is being imported (partly run)."""
    return any(getattr(getattr(module, "__spec__", None), "_initializing", False)
               for name, module in list(sys.modules.items())
               if name != but and name.startswith(__name__ + "."))


class _Registrar(importlib.abc.MetaPathFinder):
    """Until the package registers: finds ``fairseq`` and this package's modules through the
    other finders, and registers when the import of fairseq, or of the module of this
    package that imported it, ends (see the module's docstring)."""

    pending = False  # fairseq is imported; a module of this package was being imported

    def find_spec(self, name, path=None, target=None):
        if name != "fairseq" and not name.startswith(__name__ + "."):
            return None
        spec = None
        for finder in sys.meta_path:
            if not isinstance(finder, _Registrar) and hasattr(finder, "find_spec"):
                spec = finder.find_spec(name, path, target)
                if spec is not None:
                    break
        if spec is None or not isinstance(spec.loader, _OWN_LOADERS):
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_register(module):
            exec_module(module)
            if name == "fairseq":
                _Registrar.pending = True
            if _Registrar.pending and not _importing(but=name):
                _register()

        spec.loader.exec_module = exec_then_register
        return spec


if "fairseq" in sys.modules:
    _register()
elif not any(isinstance(f, _Registrar) for f in sys.meta_path):
    sys.meta_path.insert(0, _Registrar())
