"""The import graph of ``llamaindex_posfair`` and ``qdrant_tools``: no cycles, and the layer rules.

Edges are read from the source with :mod:`ast`, so nothing is imported: every
``import`` / ``from ... import`` anywhere in a module (function-level, lazy
imports included, as they run too), and the string targets of the packages'
lazy export tables (``{"Name": "module"}`` dicts at module level). The picture the rules
check is drawn in ``docs/architecture.md``. The layer rules see every edge; the cycle check
leaves out imports under ``if TYPE_CHECKING:``, which only type checkers follow (they never run).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("llamaindex_posfair", "qdrant_tools")

#: Modules of serve that may import from integrations. ``node_scoring`` is LlamaIndex-free
#: (numpy and qdrant_tools only); it is shared by PosFairRerank and the rerank endpoint, and
#: its proper home is ``encoders`` (see docs/architecture.md). Nothing else crosses.
SERVE_MAY_IMPORT_FROM_INTEGRATIONS = frozenset({"llamaindex_posfair.integrations.node_scoring"})


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    """Every module of the two packages: dotted name -> file."""
    return {module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def _absolute(module: str | None, level: int, importer: str, is_package: bool) -> str:
    """The absolute module a (possibly relative) ``from`` import names."""
    if not level:
        return module or ""
    base = importer.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def _lazy_targets(tree: ast.Module, importer: str, is_package: bool) -> Iterable[str]:
    """The modules named by module-level ``{"Name": "module"}`` tables (the lazy exports of ``_lazy.py``).

    Every string value of a module-level dict literal counts; those that are not a project
    module (environment variables, extras) are dropped by :func:`imports_of`.
    """
    for node in tree.body:
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        if isinstance(value, ast.Dict):
            for item in value.values:
                if isinstance(item, ast.Constant) and isinstance(item.value, str) and item.value:
                    target = item.value
                    level = len(target) - len(target.lstrip("."))
                    yield _absolute(target.lstrip(".") or None, level, importer, is_package)


def _type_only_imports(tree: ast.Module) -> set[int]:
    """The ``id`` of every import statement in the body of an ``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        test = node.test if isinstance(node, ast.If) else None
        if (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
            isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
        ):
            out.update(
                id(sub) for stmt in node.body for sub in ast.walk(stmt) if isinstance(sub, ast.Import | ast.ImportFrom)
            )
    return out


def imports_of(name: str, runtime_only: bool = False, mods: dict[str, Path] | None = None) -> set[str]:
    """The project modules ``name`` imports (anywhere in the file), itself excluded; ``runtime_only``: not those
    imported only under ``if TYPE_CHECKING:``; ``mods``: the modules that count (default: the two packages')."""
    mods = modules() if mods is None else mods
    path = mods[name]
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set(_lazy_targets(tree, name, is_package))
    skip = _type_only_imports(tree) if runtime_only else set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom):
            base = _absolute(node.module, node.level, name, is_package)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                found.add(full if full in mods else base)  # `from pkg import submodule` names the submodule
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m in mods and m != name}


@cache
def graph() -> dict[str, frozenset[str]]:
    return {name: frozenset(imports_of(name)) for name in modules()}


@cache
def runtime_graph() -> dict[str, frozenset[str]]:
    """:func:`graph` without the imports made for type checkers only (``if TYPE_CHECKING:``)."""
    return {name: frozenset(imports_of(name, runtime_only=True)) for name in modules()}


def strongly_connected(g: dict[str, frozenset[str]]) -> list[list[str]]:
    """Components of more than one module (Tarjan, iterative): each one is an import cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(g):
        if root in index:
            continue
        work = [(root, iter(sorted(g[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(g[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


@cache
def lab_eval_graph() -> dict[str, frozenset[str]]:
    """The import graph of ``research/eval`` (``python -m research.eval``), among its own modules."""
    mods = {module_name(p): p for p in sorted((ROOT / "research" / "eval").rglob("*.py"))}
    return {name: frozenset(imports_of(name, mods=mods)) for name in mods}


def edges(
    where: str | tuple[str, ...], to: str | tuple[str, ...], g: dict[str, frozenset[str]] | None = None
) -> list[str]:
    """``"a -> b"`` for every import of a module under ``to`` by a module under ``where`` (in ``g``, default
    :func:`graph`)."""

    def under(m: str, prefixes: tuple[str, ...]) -> bool:
        return any(m == p or m.startswith(p + ".") for p in prefixes)

    where = (where,) if isinstance(where, str) else where
    to = (to,) if isinstance(to, str) else to
    g = graph() if g is None else g
    return sorted(f"{a} -> {b}" for a, bs in g.items() if under(a, where) for b in bs if under(b, to))


# --------------------------------------------------------------------------- the graph reader itself
def test_the_reader_sees_function_level_relative_and_lazy_imports():
    g = graph()
    # function-level: EncoderSpec.load's loader is registered by the package, inside a function
    assert "llamaindex_posfair.encoders.encoder" in g["llamaindex_posfair.encoders"]
    # relative: multimodal/rerank.py `from .calibrator import ...`
    assert "llamaindex_posfair.multimodal.calibrator" in g["llamaindex_posfair.multimodal.rerank"]
    # lazy export tables: the top-level package's "PosFairRetriever" and "CalibrationView" entries
    assert "llamaindex_posfair.integrations.retriever" in g["llamaindex_posfair"]
    assert "llamaindex_posfair.encoders.view" in g["llamaindex_posfair"]
    assert "llamaindex_posfair.multimodal.types" in g["llamaindex_posfair.multimodal"]  # relative: ".types"


def test_the_reader_sets_type_only_imports_apart():
    # qdrant_tools/encoding.py names NodeLayout for type checkers only; qdrant_tools/layout.py imports it to run
    assert "qdrant_tools.layout" in graph()["qdrant_tools.encoding"]
    assert "qdrant_tools.layout" not in runtime_graph()["qdrant_tools.encoding"]
    assert "qdrant_tools.encoding" in runtime_graph()["qdrant_tools.layout"]


def test_tarjan_finds_a_planted_cycle():
    g = {"a": frozenset({"b"}), "b": frozenset({"c"}), "c": frozenset({"a"}), "d": frozenset({"a"})}
    assert strongly_connected(g) == [["a", "b", "c"]]
    assert strongly_connected({"a": frozenset({"b"}), "b": frozenset()}) == []


# --------------------------------------------------------------------------- the rules
def test_no_import_cycles():
    """No cycle of imports that run (a type-only import back, under ``if TYPE_CHECKING:``, makes none)."""
    assert strongly_connected(runtime_graph()) == []


def test_qdrant_tools_imports_nothing_from_llamaindex_posfair():
    assert edges("qdrant_tools", "llamaindex_posfair") == []


def test_nothing_outside_the_cli_imports_the_cli():
    crossing = [e for e in edges(PACKAGES, "llamaindex_posfair.cli") if not e.startswith("llamaindex_posfair.cli")]
    assert crossing == []


@pytest.mark.parametrize(
    ("layer", "may_import"),
    [
        ("llamaindex_posfair.calibration", ()),
        ("llamaindex_posfair.scoring", ()),
        ("llamaindex_posfair.eval", ()),
        ("llamaindex_posfair.backends", ("llamaindex_posfair.calibration",)),
        ("llamaindex_posfair.encoders", ("llamaindex_posfair.calibration", "llamaindex_posfair.backends")),
    ],
)
def test_lower_layers_import_only_lower_layers(layer, may_import):
    allowed = (layer, "llamaindex_posfair._lazy", *may_import)
    crossing = [e for e in edges(layer, PACKAGES) if not any(
        e.split(" -> ")[1] == p or e.split(" -> ")[1].startswith(p + ".") for p in allowed)]  # fmt: skip
    assert crossing == []


#: The parts of the lab's evaluation, research/eval (docs/architecture.md): benchmarks <- harness <- sweep <- cli;
#: memo imports none of the others.
EVAL = {p: f"research.eval.{p}" for p in ("benchmarks", "harness", "sweep", "cli", "memo")}


def test_the_lab_eval_graph_sees_its_imports():
    g = lab_eval_graph()
    assert "research.eval.harness.systems" in g["research.eval.sweep.protocol"]  # relative: ..harness.systems
    assert "research.eval.sweep.protocol" in g["research.eval.cli"]  # function-level, absolute


@pytest.mark.parametrize(
    ("part", "higher"),
    [
        ("benchmarks", ("harness", "sweep", "cli")),
        ("harness", ("sweep", "cli")),
        ("sweep", ("cli",)),
        ("memo", ("benchmarks", "harness", "sweep", "cli")),
    ],
)
def test_eval_parts_import_one_way(part, higher):
    """A part of research/eval imports nothing above it."""
    assert edges(EVAL[part], tuple(EVAL[h] for h in higher), lab_eval_graph()) == []


def test_serve_imports_no_llamaindex_class():
    """serve is a deployment of the encoders: the LlamaIndex classes call it (endpoint=), never the reverse."""
    crossing = edges(
        "llamaindex_posfair.serve", ("llamaindex_posfair.integrations", "llamaindex_posfair.multimodal.rerank")
    )
    assert [e for e in crossing if e.split(" -> ")[1] not in SERVE_MAY_IMPORT_FROM_INTEGRATIONS] == []


def _third_party(name: str) -> set[str]:
    """Top-level names of the modules ``name`` imports that are not relative."""
    tree = ast.parse(modules()[name].read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module.partition(".")[0])
        elif isinstance(node, ast.Import):
            out.update(alias.name.partition(".")[0] for alias in node.names)
    return out


def test_nothing_serve_reaches_imports_llama_index():
    g = graph()
    reached = set()
    todo = [m for m in g if m.startswith("llamaindex_posfair.serve")]
    while todo:
        for nxt in g[todo.pop()] - reached:
            reached.add(nxt)
            todo.append(nxt)
    assert sorted(m for m in reached | {"llamaindex_posfair.serve"} if "llama_index" in _third_party(m)) == []


# --------------------------------------------------------------------------- the lab stays out of the package
def research_imports(name: str) -> list[str]:
    """The ``research`` modules that module ``name`` of the packages imports (anywhere in the file)."""
    tree = ast.parse(modules()[name].read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
    return sorted(m for m in found if m == "research" or m.startswith("research."))


def test_the_research_check_sees_a_planted_import(tmp_path, monkeypatch):
    planted = tmp_path / "planted.py"
    planted.write_text("def f():\n    from research.default_pipeline.system import cpu_load\n    import research\n")
    monkeypatch.setitem(modules(), "llamaindex_posfair.planted", planted)
    assert research_imports("llamaindex_posfair.planted") == ["research", "research.default_pipeline.system"]


def test_the_package_imports_nothing_from_research():
    """research/ imports the package to rerun the sweeps; the package never imports research (it is not shipped)."""
    assert {name: research_imports(name) for name in modules() if research_imports(name)} == {}


def test_only_the_cli_imports_the_audit():
    """``audit`` sits at the integrations layer (it uses integrations, eval, qdrant_tools, encoders): nothing
    below it imports it, only the CLI does."""
    crossing = [
        e for e in edges(PACKAGES, "llamaindex_posfair.audit")
        if not e.startswith(("llamaindex_posfair.audit", "llamaindex_posfair.cli"))
    ]  # fmt: skip
    assert crossing == []
    assert edges("llamaindex_posfair.audit", "llamaindex_posfair.cli") == []
