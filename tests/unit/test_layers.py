"""Layers that hold: the import graph of src/fwlab, derived with ``ast``, has no edge against the
data flow, no import circle and no private name imported from another module.

The rule (docs/architecture.md): data flows

    suites -> testbed -> dut -> runners -> methods | floods -> results -> stats -> published
           -> analysis | report,

with the rule sets (``rules``, pure data) and the search algorithms (``search``, pure) read by
all of them, and the run pipeline on top of it all, in its own order: ``run.plan`` (a suite
against the plug-ins) -> ``run.load``, ``run.preflight``, ``run.progress``, ``run.header``,
``run.beds``, ``run.stages`` -> ``run.trial`` -> ``run.executor``, ``run.staged`` -> ``run.start``
(the one entry point) ->
``run.baseline``; the rule-set runs (``ruleset``) and the benches (``bench``) on top of the run
pipeline; the CLI on top of everything. errors / registry / validation / svgplot (and the
package root, for its version) are a shared bottom. A module may import its own layer, the
bottom, and any layer of a LOWER rank (upstream of it). Importing a layer of the same or a
higher rank (downstream) is an edge against the flow. Both module-level and function-level
imports count: an import hidden in a function is still an edge.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"

#: rank of each layer: a module may import only layers of a lower rank (or its own layer, or
#: the bottom). The longest matching module prefix decides; equal ranks may not import each other.
RANKS: dict[str, int] = {
    # shared bottom
    "fwlab": 0, "fwlab.errors": 0, "fwlab.registry": 0, "fwlab.validation": 0, "fwlab.files": 0,
    "fwlab.linerate": 0,          # a line rate, typed once (the suite, the plan, the bed, the record)
    "fwlab.svgplot": 0,           # figures as reproducible SVG text: the report's and the trend page's
    "fwlab.webpage": 0,           # HTML pages' templates and interactive plots: the report's and the trend page's
    # pure data and pure algorithms that every layer may read
    "fwlab.rules": 1,             # rule sets: what a suite's layouts mean, generated or imported
    "fwlab.search": 1,            # search algorithms the tools' measurers and methods drive
    # the input: a suite (its [[background]] floods and tuning profiles are suite data)
    "fwlab.suites": 2,
    "fwlab.testbed": 3,           # namespaces, links, hosts, bed services
    "fwlab.dut": 4,               # firewall backends
    "fwlab.runners": 5,           # one module per traffic tool
    "fwlab.probes": 5,            # in-kernel clock: measures the DUT during a trial (builds like dut.xdp)
    "fwlab.methods": 6,           # test methods built on the tools
    "fwlab.floods": 6,            # background floods (a method beside a trial)
    "fwlab.results": 7,           # the record
    "fwlab.stats": 8,             # statistics over recorded figures
    "fwlab.published": 9,         # published studies, compared with stats
    "fwlab.analysis": 10,         # reads results/stats (never the report)
    "fwlab.report": 10,           # reads results/stats/published
    # the run pipeline, in its own order
    "fwlab.run.plan": 11,         # a suite checked against the plug-ins and expanded into trials
    "fwlab.run.estimate": 12,     # what a plan will cost in time
    "fwlab.run.preflight": 12,    # checks before anything is built
    "fwlab.run.progress": 12,     # the progress line
    "fwlab.run.header": 12,       # the head of every run's record
    "fwlab.run.beds": 12,         # the one place a test bed is made, and its life between backends
    "fwlab.run.load": 12,         # a trial's rule set: the generator choice, the load, its reads
    "fwlab.run.stages": 12,       # a staged job's parts: stages, trials naming registered methods
    "fwlab.run.trial": 13,        # one trial -> its record line
    "fwlab.run.executor": 14,     # the order of work
    "fwlab.run.staged": 14,       # a staged job's order of work: one bed, one record, its stages
    "fwlab.run.start": 15,        # the one entry point: start / resume
    "fwlab.run.baseline": 16,     # a suite run N times, read back as noise
    # on top of the run pipeline: imported rule sets (fwlab run --ruleset, fwlab optimize: their
    # beds and record heads from the pipeline), benches
    "fwlab.ruleset": 16,
    "fwlab.bench": 17,            # each bench: a suite or a staged job through run.start
    # the CLI on top of everything, in its own order: what every command shares, the commands (one
    # module per group; `run` ends as `records` does, with its report), the root parser and main,
    # the package face
    "fwlab.cli.contract": 18,     # exit statuses, --json, text tables
    "fwlab.cli.records": 19,      # report, compare, baseline, trend, export; the report a run ends with
    "fwlab.cli.dry_run": 19,      # fwlab run --dry-run: the plan printed
    "fwlab.cli.optimize": 19,
    "fwlab.cli.bench": 19,
    "fwlab.cli.lab": 19,          # list, rules, clean, version
    "fwlab.cli.run": 20,
    "fwlab.cli.parser": 21,       # the root parser and main
    "fwlab.cli": 22,              # the package face: main, build_parser, the exit statuses
    "fwlab.__main__": 23,         # python -m fwlab: the CLI
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


@pytest.mark.parametrize("src,dst,expected", [
    ("fwlab.run.plan", "fwlab.run.executor", True),       # the pipeline's own order
    ("fwlab.run.trial", "fwlab.run.start", True),
    ("fwlab.testbed.bed", "fwlab.run.beds", True),         # a bed never reaches back into the run
    ("fwlab.run.executor", "fwlab.ruleset.run", True),     # the rule-set run sits on the pipeline
    ("fwlab.run.start", "fwlab.bench.search", True),
    ("fwlab.ruleset.run", "fwlab.run.beds", False),
    ("fwlab.bench.conn", "fwlab.run.beds", False),
    ("fwlab.results.identity", "fwlab.suites.background", False),  # suite data is upstream
])
def test_the_pipelines_order(src, dst, expected):
    assert ((src, dst) in against_flow({src: {dst}})) is expected


def test_every_rank_names_a_module():
    """No rank for a module that does not exist (a rank kept for a removed module bends nothing
    but misleads the reader)."""
    missing = sorted(p for p in RANKS if not is_module(p))
    assert not missing, f"RANKS names modules that do not exist: {missing}"


# -- import circles ---------------------------------------------------------------------------------
def circles(g: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted.

    An edge from a package's own module to the package's ``__init__`` is not counted: a package
    face (``__init__`` handing its modules' names on) is imported by its own modules only through
    those names, which Python resolves without a loop of definitions."""
    edges = {m: {t for t in ts if t in g and t != m and not (m.startswith(t + ".") and _is_package(t))}
             for m, ts in g.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(out)


def _is_package(name: str) -> bool:
    return (SRC.joinpath(*name.split(".")) / "__init__.py").exists()


def test_no_import_circle():
    found = circles(graph())
    assert not found, "import circles (modules that import each other, directly or round about):\n" + \
        "\n".join(" <-> ".join(c) for c in found)


@pytest.mark.parametrize("g,expected", [
    ({"fwlab.a": {"fwlab.b"}, "fwlab.b": {"fwlab.a"}}, [["fwlab.a", "fwlab.b"]]),
    ({"fwlab.a": {"fwlab.b"}, "fwlab.b": {"fwlab.c"}, "fwlab.c": {"fwlab.a"}}, [["fwlab.a", "fwlab.b", "fwlab.c"]]),
    ({"fwlab.a": {"fwlab.b"}, "fwlab.b": set()}, []),
])
def test_circles_finds_loops(g, expected):
    assert circles(g) == expected


# -- private names ----------------------------------------------------------------------------------
def private_imports(path: Path) -> list[str]:
    """``from fwlab.x import _name`` in ``path`` where fwlab.x is another module: a private name
    (one leading underscore, not a dunder) used outside the module that defines it."""
    mod = module_name(path)
    package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
            target = ".".join(base + ([node.module] if node.module else []))
        else:
            target = node.module or ""
        if not (target == "fwlab" or target.startswith("fwlab.")) or target == mod:
            continue
        for a in node.names:
            if a.name.startswith("_") and not a.name.startswith("__"):
                out.append(f"{mod}:{node.lineno} imports {a.name} from {target}")
    return out


def test_no_private_name_imported_across_modules():
    bad = [line for p in sorted((SRC / "fwlab").rglob("*.py")) for line in private_imports(p)]
    assert not bad, "private names imported from another module (make them public, or move them):\n" + \
        "\n".join(bad)


def test_private_imports_are_found(tmp_path, monkeypatch):
    pkg = tmp_path / "fwlab"
    pkg.mkdir()
    (pkg / "a.py").write_text("def _x():\n    pass\n")
    (pkg / "b.py").write_text("from fwlab.a import _x, __version__\nfrom . import a\n")
    monkeypatch.setattr(f"{__name__}.SRC", tmp_path)
    assert private_imports(pkg / "b.py") == ["fwlab.b:1 imports _x from fwlab.a"]
    assert private_imports(pkg / "a.py") == []
