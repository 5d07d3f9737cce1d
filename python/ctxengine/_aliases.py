"""Old import paths of the modules that the layer layout moved (ADR 0006).

Each moved module keeps its old dotted path for one release: importing
``ctxengine.builder`` returns the very module ``ctxengine.assembly.builder``
(same object, so the same names and the same monkeypatch target) and emits
one ``DeprecationWarning`` naming the new path. One table, one meta-path
finder, no shim files. ``ctxengine.model``, ``ctxengine.plan`` and
``ctxengine.cli`` became packages under their old names and need no alias.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Sequence
from importlib.abc import Loader, MetaPathFinder
from importlib.machinery import ModuleSpec
from types import ModuleType

MOVED: dict[str, str] = {
    "ctxengine.clock": "ctxengine.model.clock",
    "ctxengine.backends": "ctxengine.core.backends",
    "ctxengine.canonical": "ctxengine.core.canonical",
    "ctxengine.estimator": "ctxengine.core.estimator",
    "ctxengine.history": "ctxengine.core.history",
    "ctxengine.budget": "ctxengine.core.budget",
    "ctxengine.events": "ctxengine.stores.events",
    "ctxengine.framing": "ctxengine.plan.framing",
    "ctxengine.builder": "ctxengine.assembly.builder",
    "ctxengine.envelope": "ctxengine.assembly.envelope",
    "ctxengine.regions": "ctxengine.assembly.regions",
    "ctxengine.render": "ctxengine.assembly.render",
    "ctxengine.request": "ctxengine.assembly.request",
    "ctxengine.checkpoints": "ctxengine.runtime.checkpoints",
    "ctxengine.compaction": "ctxengine.runtime.compaction",
    "ctxengine.loop": "ctxengine.runtime.loop",
    "ctxengine.session": "ctxengine.runtime.session",
    "ctxengine.working_state": "ctxengine.runtime.working_state",
    "ctxengine.bench": "ctxengine.cli.bench",
    "ctxengine.bench_report": "ctxengine.cli.bench_report",
    "ctxengine.demo": "ctxengine.cli.demo",
    "ctxengine.demo_checks": "ctxengine.cli.demo_checks",
    "ctxengine.demo_view": "ctxengine.cli.demo_view",
    "ctxengine.fakemodel": "ctxengine.cli.fakemodel",
    "ctxengine.inspection": "ctxengine.cli.inspection",
    "ctxengine.synthetic": "ctxengine.cli.synthetic",
}


def deprecation_message(old: str) -> str:
    return (
        f"{old} is deprecated: it moved to {MOVED[old]}; import it from there "
        "(the old path will be removed in the next release)"
    )


class MovedModuleFinder(MetaPathFinder, Loader):
    """Resolves an old dotted path to the module now living at its new path."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return ModuleSpec(fullname, self)

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        # stacklevel 2 skips importlib's own frames: the warning names the importing line.
        warnings.warn(deprecation_message(spec.name), DeprecationWarning, stacklevel=2)
        module = importlib.import_module(MOVED[spec.name])
        # The import system is about to overwrite __spec__ with the alias's spec;
        # keep the real one so exec_module can put it back.
        spec.loader_state = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        alias_spec = module.__spec__
        if alias_spec is not None and alias_spec.loader is self:
            module.__spec__ = alias_spec.loader_state


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once per process)."""
    if not any(isinstance(finder, MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, MovedModuleFinder())


def moved_module(name: str) -> ModuleType:
    """``ctxengine.<old name>`` as an attribute: import the old path (warning once)."""
    return importlib.import_module(f"ctxengine.{name}")


__all__ = ["MOVED", "MovedModuleFinder", "deprecation_message", "install", "moved_module"]
