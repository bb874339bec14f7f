"""Layers that hold: the import graph of src/fwlab, derived with ``ast``, has no edge against the
data flow.

The rule (README "Layout"): data flows

    suites -> rules -> testbed -> dut -> search -> runners -> methods -> results -> stats -> published
           -> analysis | report,   with cli / orchestrate / bench / planning on top,

and errors / registry / validation / svgplot (and the package root, for its version) a shared bottom. A
module may import its own package, the bottom, and any layer of a LOWER rank (upstream of it).
Importing a layer of the same or a higher rank (downstream) is an edge against the flow. Both
module-level and function-level imports count: an import hidden in a function is still an edge.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"

#: rank of each layer: a module may import only layers of a lower rank (or its own package, or
#: the bottom). The longest matching module prefix decides; equal ranks may not import each other.
RANKS: dict[str, int] = {
    # shared bottom
    "fwlab": 0, "fwlab.errors": 0, "fwlab.registry": 0, "fwlab.validation": 0,
    "fwlab.svgplot": 0,           # figures as reproducible SVG text: the report's and the trend page's
    # the inputs: a suite (its [[background]] flood items are suite data) and the hosts file
    "fwlab.floods.model": 1, "fwlab.suites": 2,
    "fwlab.rules": 3,             # rule sets the suite names, loaded by the DUT
    "fwlab.testbed": 4,           # namespaces, links, hosts, bed services
    "fwlab.dut": 5,               # firewall backends
    "fwlab.search": 6,            # search algorithms (pure) the tools' measurers and methods drive
    "fwlab.runners": 7,           # one module per traffic tool
    "fwlab.methods": 8,           # test methods built on the tools
    "fwlab.floods": 8,            # background floods (a method beside a trial)
    "fwlab.results": 9,           # the record
    "fwlab.stats": 10,             # statistics over recorded figures
    "fwlab.published": 11,        # published studies, compared with stats
    "fwlab.analysis": 12,         # reads results/stats (never the report)
    "fwlab.report": 12,           # reads results/stats/published
    # on top: planning a suite against the plug-ins, running it, the CLI, benches
    "fwlab.run.plan": 13,
    "fwlab.run.estimate": 14, "fwlab.run.executor": 14, "fwlab.bench": 14, "fwlab.baseline": 14,
    "fwlab.ruleset.mix": 13,      # the class mix of fwlab run --ruleset: weights, mix figures (stats)
    "fwlab.ruleset.run": 14,      # fwlab run --ruleset: runs an imported rule set, like orchestrate
    "fwlab.bench.search": 15,     # runs its suite through the orchestrator
    "fwlab.ruleset.optimize": 15,  # fwlab optimize: reuses ruleset_run's bed, probes and sends
    "fwlab.cli": 16,
    "fwlab.__main__": 17,         # python -m fwlab: the CLI
}
BOTTOM = 0

#: edges against the flow still open, each with its reason; each must still exist (a fixed one
#: fails the test until it is removed here), so this list only shrinks
KNOWN: dict[tuple[str, str], str] = {}

#: the package root's public entry points: imported lazily, inside the root's module-level
#: ``__getattr__`` only (`test_root_imports_only_lazily`), so that importing ``fwlab`` (which
#: every layer does, for the version) imports no layer
ROOT_ENTRY_POINTS: dict[tuple[str, str], str] = {
    ("fwlab", "fwlab.analysis.load"): "fwlab.load(run_dir), the notebook entry point",
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_module(name: str) -> bool:
    path = SRC.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def imports_of(path: Path) -> set[str]:
    """Every fwlab module ``path`` imports, at any depth of the file (functions included)."""
    mod = module_name(path)
    package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            out.add(target)
            # "from fwlab.x import y" may name a submodule y: count it as that module
            out |= {f"{target}.{a.name}" for a in node.names if is_module(f"{target}.{a.name}")}
    return {m for m in out if m == "fwlab" or m.startswith("fwlab.")}


def graph() -> dict[str, set[str]]:
    return {module_name(p): imports_of(p) for p in sorted((SRC / "fwlab").rglob("*.py"))}


def layer(mod: str) -> tuple[str, int]:
    """(layer prefix, rank) of a module: the longest prefix in RANKS."""
    best = max((p for p in RANKS if mod == p or mod.startswith(p + ".")), key=len, default=None)
    if best is None:
        raise AssertionError(f"module {mod} is in no layer: add it to RANKS in {__file__}")
    return best, RANKS[best]


def against_flow(g: dict[str, set[str]]) -> dict[tuple[str, str], str]:
    bad = {}
    for src, targets in g.items():
        s_layer, s_rank = layer(src)
        for dst in targets:
            d_layer, d_rank = layer(dst)
            if d_layer == s_layer or d_rank == BOTTOM or d_rank < s_rank:
                continue
            bad[(src, dst)] = f"{src} (rank {s_rank}, {s_layer}) imports {dst} (rank {d_rank}, {d_layer})"
    return bad


def test_every_module_is_in_a_layer():
    for mod in graph():
        layer(mod)


def test_no_import_against_the_data_flow():
    bad = {e: why for e, why in against_flow(graph()).items() if e not in KNOWN and e not in ROOT_ENTRY_POINTS}
    assert not bad, "imports against the data flow:\n" + "\n".join(sorted(bad.values()))


def test_root_imports_only_lazily():
    """The package root imports nothing at module level; its entry points only in ``__getattr__``."""
    path = SRC / "fwlab" / "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    lazy = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "__getattr__"]
    inside = {id(x) for f in lazy for x in ast.walk(f)}
    stray = [n.lineno for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
             and id(n) not in inside and not (isinstance(n, ast.ImportFrom) and n.module == "__future__")]
    assert not stray, f"fwlab/__init__.py imports outside __getattr__ at lines {stray}"
    assert {("fwlab", m) for m in imports_of(path)} <= set(ROOT_ENTRY_POINTS)


def test_known_exceptions_are_still_real():
    """An exception that no longer exists is removed from KNOWN (the list only shrinks)."""
    bad = against_flow(graph())
    stale = [e for e in KNOWN if e not in bad]
    assert not stale, f"fixed, remove from KNOWN: {stale}"


@pytest.mark.parametrize("src,dst,expected", [
    ("fwlab.dut.proxy", "fwlab.runners.txmix", True),      # downstream import
    ("fwlab.suites.schema", "fwlab.runners", True),
    ("fwlab.analysis.x", "fwlab.report.summary", True),    # equal rank, other layer
    ("fwlab.runners.curl", "fwlab.dut.base", False),       # upstream import
    ("fwlab.stats.fit", "fwlab.errors", False),            # the bottom
    ("fwlab.cli", "fwlab.report", False),                  # top reads anything
    ("fwlab.suites.schema", "fwlab.run.plan", True),    # the planning module is on top
])
def test_the_rule_itself(src, dst, expected):
    assert ((src, dst) in against_flow({src: {dst}})) is expected
