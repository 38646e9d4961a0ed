"""The public API is what the README and docs import: ``llamaindex_posfair.__all__`` matches them.

* README examples import only from ``llamaindex_posfair``, ``qdrant_tools.store`` and
  third-party packages (never from a module deeper in this project);
* every name a README or docs example imports from ``llamaindex_posfair`` is in ``__all__``;
* every name in ``__all__`` resolves, and is documented in README.md or docs/*.md;
* the first names of renamed classes still import, as the same class objects.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from pathlib import Path

import pytest

import llamaindex_posfair

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
OURS = ("llamaindex_posfair", "qdrant_tools")
README_MAY_IMPORT_FROM = ("llamaindex_posfair", "qdrant_tools.store")

_BLOCK = re.compile(r"```python\n(.*?)```", re.S)
_INLINE = re.compile(r"`(from [\w.]+ import [^`]+)`")
_IMPORT = re.compile(r"^[ \t]*(from[ \t]+[\w.]+[ \t]+import[ \t]+(?:\([^)]*\)|[^\n]+)|import[ \t]+[^\n]+)", re.M)


def imports_in(markdown: Path) -> list[tuple[str, str]]:
    """``(module, name)`` of every import in the file's python blocks and inline ``from X import Y``
    code spans (``(module, "")`` for ``import module``); only the import statements are parsed,
    so an example with ``...`` placeholders elsewhere still counts."""
    text = markdown.read_text(encoding="utf-8")
    statements = [m.group(1) for block in _BLOCK.findall(text) for m in _IMPORT.finditer(block)]
    statements += [span.split(";")[0] for span in _INLINE.findall(text)]
    out = []
    for statement in statements:
        for node in ast.parse(statement.strip()).body:
            if isinstance(node, ast.ImportFrom):
                out += [(node.module or "", alias.name) for alias in node.names]
            elif isinstance(node, ast.Import):
                out += [(alias.name, "") for alias in node.names]
    return out


def test_the_parser_reads_blocks_multiline_imports_and_inline_spans(tmp_path):
    md = tmp_path / "x.md"
    md.write_text(
        "Use `from a.b import c; c()`.\n\n```python\nimport uuid\nfrom x import (\n    y,\n    z)\n"
        "samples = [f(s) for ...]\n```\n\n```bash\nfrom nothing import here\n```\n"
    )
    assert sorted(imports_in(md)) == [("a.b", "c"), ("uuid", ""), ("x", "y"), ("x", "z")]


def test_readme_has_examples_importing_the_package():
    names = {name for module, name in imports_in(README) if module == "llamaindex_posfair"}
    assert {"PosFairEncoder", "PosFairRetriever", "PosFairRerank"} <= names


@pytest.mark.parametrize(("module", "name"), imports_in(README), ids=lambda v: v or "-")
def test_readme_imports_only_public_modules(module, name):
    top = module.partition(".")[0]
    if top in OURS:
        assert module in README_MAY_IMPORT_FROM, (
            f"README imports {name or module} from {module}; import it from llamaindex_posfair "
            "(add it to llamaindex_posfair._PUBLIC if it is public API)"
        )
    else:
        assert top in sys.stdlib_module_names or importlib.util.find_spec(top) is not None, module


@pytest.mark.parametrize("markdown", [README, *DOCS], ids=lambda p: p.name)
def test_every_name_imported_from_the_package_is_exported(markdown):
    imported = {name for module, name in imports_in(markdown) if module == "llamaindex_posfair"}
    assert sorted(imported - set(llamaindex_posfair.__all__)) == []


def test_every_export_resolves_and_is_documented():
    text = "\n".join(p.read_text(encoding="utf-8") for p in [README, *DOCS])
    undocumented = [n for n in llamaindex_posfair.__all__ if not re.search(rf"\b{re.escape(n)}\b", text)]
    assert undocumented == []
    missing = [n for n in llamaindex_posfair.__all__ if getattr(llamaindex_posfair, n, None) is None]
    assert missing == []


def test_each_reranker_has_one_public_name_and_it_is_its_class_name():
    from llamaindex_posfair import PosFairImageRerank, PosFairRerank
    from llamaindex_posfair.multimodal import __all__ as multimodal_all

    assert (PosFairRerank.__name__, PosFairRerank.class_name()) == ("PosFairRerank", "PosFairRerank")
    assert (PosFairImageRerank.__name__, PosFairImageRerank.class_name()) == (
        "PosFairImageRerank",
        "PosFairImageRerank",
    )
    assert {"PositionFairRerank", "AttentionGuidedImageRerank"}.isdisjoint(llamaindex_posfair.__all__)
    assert "AttentionGuidedImageRerank" not in multimodal_all
    assert not hasattr(llamaindex_posfair, "AttentionGuidedImageRerank")
    assert not hasattr(llamaindex_posfair, "PositionFairRerank")


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="has no attribute 'PosFairNothing'"):
        llamaindex_posfair.PosFairNothing  # noqa: B018
