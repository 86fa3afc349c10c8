"""The import rules docs/architecture.md states, checked against the code (fast tier).

The house is read from its own source with `ast`: every `import` and `from ... import` of a
`banana100` module, module-level or inside a function alike, is an arrow. A name imported from a
package that is one of its submodules is an arrow to that submodule, not to the package's face.
"""

from __future__ import annotations

import ast
import collections
import re
from functools import cache
from pathlib import Path

import pytest

from fixtures.repopaths import REPO

PACKAGE = REPO / "banana100"

# The layers of docs/architecture.md: what each part of the library may import (besides itself).
BASE = {"errors", "fileio", "workers", "distributed", "imageio", "schema", "about", "extras", "synth", "hubio",
        "texttable"}
MAY_IMPORT = {
    "errors": set(),
    "fileio": {"errors"},
    "workers": set(),
    "distributed": set(),
    "imageio": {"errors", "fileio"},
    "schema": {"errors"},
    "about": set(),
    "extras": {"errors", "about"},
    "synth": {"errors", "fileio"},
    "hubio": {"errors"},
    "texttable": set(),
    "protocol": {"errors"},
    "metrics": BASE | {"protocol"},
    "chains": BASE,
    "dataset": BASE | {"chains"},
    "scoring": BASE | {"metrics", "chains", "dataset"},
    "report": BASE | {"protocol", "metrics"},
    "leaderboard": BASE | {"protocol", "metrics", "report"},
    "demo": BASE | {"protocol", "metrics", "chains", "dataset", "scoring", "report"},
    "explore": BASE | {"protocol", "metrics", "chains", "dataset", "scoring", "report", "leaderboard", "demo"},
}
FACES = {"cli", "testing", "__main__"}  # may import anything; nothing in the library imports them


@cache
def modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the library."""
    out = {}
    for f in PACKAGE.rglob("*.py"):
        rel = f.relative_to(REPO).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        out[".".join(parts)] = f
    return out


def _owner(name: str) -> str:
    """The longest prefix of `name` that is a module of the library ('' if none)."""
    while name and name not in modules():
        name = name.rpartition(".")[0]
    return name


@cache
def arrows() -> dict[str, set[str]]:
    """module -> the library modules it imports."""
    out: dict[str, set[str]] = collections.defaultdict(set)
    for name, f in modules().items():
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules() else node.module
                           for a in node.names]
            else:
                continue
            out[name] |= {_owner(t) for t in targets if t.startswith("banana100")} - {"", name}
    return out


def _part(module: str) -> str:
    """The part of the library a module belongs to: banana100.metrics.engine.feed -> metrics."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "banana100"


def _cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, on, stack, found, counter = {}, {}, set(), [], [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in arrows().get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(modules()):
        if v not in index:
            visit(v)
    return found


def test_there_is_no_import_circle():
    assert _cycles() == []


def test_each_part_imports_only_the_layers_below_it():
    wrong = []
    for module, targets in sorted(arrows().items()):
        part = _part(module)
        if part in FACES or part == "banana100":
            continue
        allowed = MAY_IMPORT[part] | {part, "banana100"}
        wrong += [f"{module} -> {t}" for t in sorted(targets) if _part(t) not in allowed]
    assert wrong == []


def test_nothing_in_the_library_imports_its_faces():
    wrong = [f"{m} -> {t}" for m, ts in arrows().items() if _part(m) not in FACES
             for t in ts if _part(t) in FACES]
    assert wrong == []


def test_metrics_has_a_front_desk_of_at_most_eight_modules_and_its_rooms():
    top = sorted(p.stem for p in (PACKAGE / "metrics").glob("*.py"))
    rooms = sorted(p.name for p in (PACKAGE / "metrics").iterdir() if (p / "__init__.py").is_file())
    assert len(top) <= 8, top
    assert rooms == ["detector", "engine", "hub", "native", "vlm"]


def test_a_package_face_is_never_imported_by_its_own_children():
    wrong = []
    for module, targets in arrows().items():
        for t in targets:
            if modules()[t].name == "__init__.py" and module.startswith(t + ".") and t != "banana100":
                wrong.append(f"{module} -> {t}")
    assert wrong == []


def _library_names(f: Path) -> set[str]:
    """The names bound to library modules in a file (`import banana100.x as y`, `from banana100 import x`)."""
    names = set()
    for node in ast.walk(ast.parse(f.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("banana100"):
            names |= {a.asname or a.name for a in node.names if f"{node.module}.{a.name}" in modules()}
        elif isinstance(node, ast.Import):
            names |= {a.asname for a in node.names if a.name.startswith("banana100") and a.asname}
    return names


@pytest.mark.parametrize("folder", ["banana100", "bench", "tests"])
def test_no_private_name_of_the_library_is_used_outside_its_module(folder):
    """`from banana100.x import _y` and `x._y` on a library module: a name with a leading underscore
    is its module's own; what another module needs gets a public name."""
    wrong = []
    for f in sorted((REPO / folder).rglob("*.py")):
        if ".venv" in f.parts:
            continue
        library = _library_names(f)
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("banana100"):
                wrong += [f"{f.relative_to(REPO)}:{node.lineno}: {node.module}.{a.name}" for a in node.names
                          if a.name.startswith("_") and not a.name.startswith("__")]
            elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in library
                  and node.attr.startswith("_") and not node.attr.startswith("__")):
                wrong.append(f"{f.relative_to(REPO)}:{node.lineno}: {node.value.id}.{node.attr}")
    assert wrong == []


def test_no_function_of_the_library_is_over_100_lines():
    long = []
    for f in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 100:
                long.append(f"{f.relative_to(REPO)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1})")
    assert long == []


def test_the_scorers_implement_the_one_contract():
    from banana100.metrics.detector.relative import RelativeScorer, SharedBareScorer
    from banana100.metrics.engine.contract import Scorer
    from banana100.metrics.engine.scorer import MetricScorer
    from banana100.metrics.resolve import ModuleScorer
    from banana100.metrics.vlm.scorer import VLMScorer

    for cls in (MetricScorer, VLMScorer, RelativeScorer, SharedBareScorer, ModuleScorer):
        assert issubclass(cls, Scorer) and not getattr(cls, "__abstractmethods__", None), cls


def _documented_tree() -> list[str]:
    """The file and folder names docs/architecture.md's tree lists (its first code block)."""
    text = (REPO / "docs" / "architecture.md").read_text()
    block = text.split("```", 2)[1]
    names = []
    for line in block.splitlines():
        first = line.strip().split(" ", 1)[0]
        if first.endswith((".py", "/")) or first == "<command>.py":
            names.append(first)
    return names


def test_docs_architecture_lists_every_module_and_nothing_that_is_gone():
    listed = _documented_tree()
    files = {p.name for p in PACKAGE.rglob("*.py") if p.name != "__init__.py"} | {
        p.name + "/" for p in PACKAGE.rglob("*") if p.is_dir() and (p / "__init__.py").is_file()}
    gone = [n for n in listed if n not in files and n not in ("banana100/", "<command>.py", "__init__.py")]
    assert gone == [], "docs/architecture.md lists what the tree lacks"
    block = (REPO / "docs" / "architecture.md").read_text().split("```", 2)[1]
    cli_commands = {p.name for p in (PACKAGE / "cli").glob("*.py")} - {"__init__.py", "common.py", "scoresout.py"}
    missing = sorted(n for n in files - cli_commands - {"__main__.py"}
                     if not re.search(rf"(?<![\w.]){re.escape(n)}", block))
    assert missing == [], "docs/architecture.md does not list these modules"
