"""The layer map of ADR 0006, enforced: imports point down, nothing imports cli/.

Every ``import`` in the package (module level or inside a function) is parsed
with ``ast`` and resolved to the layer it reaches. A module may import its own
layer and the layers below it, never one above; only ``__main__`` imports
``cli``. The one upward edge, with its reason, is listed in ``ALLOWED``.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

import ctxengine

PACKAGE = Path(ctxengine.__file__).parent

# Bottom to top. A layer may import the layers listed before it.
ENGINE = (
    "errors",
    "model",
    "reference",
    "core",
    "interop",
    "stores",
    "plan",
    "assembly",
    "runtime",
    "phases",
    "engine",
    # Drop-ins for other libraries (LangChain, the Agents SDK), built on the session API.
    "integrations",
    # Replaying recorded sessions (issue 42): verified as recorded (ADR 0024) and under other
    # configurations (ADR 0025).
    "replay",
)
# Leaf renderers: built on assembly's ModelRequest; no engine layer imports them.
PROVIDERS_MAY_IMPORT = frozenset({"errors", "model", "core", "assembly", "providers"})
# The session API renders requests for the wire: the one engine layer that imports providers.
IMPORTS_PROVIDERS = frozenset({"engine", "replay"})
# The public face (ctxengine/__init__.py) sits above the engine, below cli.
FACE = frozenset({"face"})

# (importer, imported): the edges that point up, and why.
ALLOWED = {
    # A value's canonical bytes and digest are computed once by the active backend and
    # cached on the value (``_cj``); the import is inside the method, so ``model``
    # imports without ``core``.
    ("ctxengine.model.items", "ctxengine.core.backends"),
}

SOURCES = sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> str:
    parts = module.split(".")
    if parts[0] != "ctxengine":
        raise ValueError(module)
    if len(parts) == 1:
        return "face"
    head = parts[1]
    if head == "__main__":
        return "main"
    if head == "_core":
        return "core"  # the native half of the backend seam
    return head


def imports_of(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) for every ctxengine import in ``path``."""
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "ctxengine"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "ctxengine":
                continue
            # from package import x: x may be a submodule (then that is the import).
            found += [(node.lineno, _submodule(target, a.name)) for a in node.names]
    return sorted(set(found))


def _submodule(package: str, name: str) -> str:
    folder = PACKAGE.parent.joinpath(*package.split("."))
    if (folder / f"{name}.py").exists() or (folder / name / "__init__.py").exists():
        return f"{package}.{name}"
    return package


def may_import(importer: str, imported: str) -> bool:
    if importer == imported:
        return True
    if imported == "cli":
        return importer in {"cli", "main"}
    if importer in {"cli", "main"}:
        return True
    if importer in FACE:
        return True
    if imported in FACE:
        return False
    if importer == "providers":
        return imported in PROVIDERS_MAY_IMPORT
    if imported == "providers":
        return importer in IMPORTS_PROVIDERS
    return ENGINE.index(imported) < ENGINE.index(importer)


def test_every_module_has_a_known_layer() -> None:
    known = set(ENGINE) | FACE | {"providers", "cli", "main"}
    unknown = {layer_of(module_name(p)) for p in SOURCES} - known
    assert unknown == set(), "place the new subpackage in the map: adr/0006-layer-map.md and this file"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_down_the_layer_map(path: Path) -> None:
    importer = module_name(path)
    wrong = [
        f"line {line}: {importer} ({layer_of(importer)}) imports {target} ({layer_of(target)})"
        for line, target in imports_of(path)
        if (importer, target) not in ALLOWED and not may_import(layer_of(importer), layer_of(target))
    ]
    assert wrong == []


def test_the_allowed_exceptions_still_exist() -> None:
    # An exception nobody needs any more must be deleted, not kept as a loophole.
    for importer, target in ALLOWED:
        path = PACKAGE.parent / (importer.replace(".", "/") + ".py")
        assert target in {t for _, t in imports_of(path)}, (importer, target)


def test_the_checker_catches_an_upward_and_a_cli_import(tmp_path: Path) -> None:
    assert not may_import("core", "assembly")
    assert not may_import("stores", "plan")
    assert not may_import("runtime", "cli")
    assert not may_import("phases", "providers")
    assert not may_import("runtime", "engine") and may_import("engine", "providers")
    assert not may_import("providers", "runtime")
    assert not may_import("model", "face")
    assert may_import("runtime", "assembly") and may_import("cli", "runtime") and may_import("main", "cli")


def test_the_top_folder_holds_only_the_face() -> None:
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert top == ["__init__.py", "__main__.py", "errors.py"], "put new modules in a layer"


def test_no_source_file_is_over_500_lines() -> None:
    long = {str(p.relative_to(PACKAGE)): n for p in SOURCES if (n := len(p.read_text().splitlines())) > 500}
    assert long == {}


def test_every_error_class_lives_in_errors() -> None:
    stray = []
    for info in pkgutil.walk_packages(ctxengine.__path__, "ctxengine."):
        if info.name in {"ctxengine.__main__"} or info.name.split(".")[-1] == "_core":
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            # Private control-flow exceptions that never escape their module are exempt.
            public = not name.startswith("_")
            if (
                public
                and inspect.isclass(obj)
                and issubclass(obj, BaseException)
                and obj.__module__ == info.name
            ):
                stray.append(f"{info.name}.{name}")
    assert [s for s in stray if not s.startswith("ctxengine.errors.")] == []
