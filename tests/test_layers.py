"""The import graph runs one way: store <- notifications <- runtime's leaves <- knowledge <- inference <-
tools <- skills <- mcp <- agent <- harness <- web <- daemon <- eval <- cli. A module may import its own layer and the
ones below it, never one above; the test names each edge that runs back up."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers import REPO

# Lowest first. A module belongs to the layer of the longest prefix that names it.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("store",),
    ("notifications",),
    ("runtime", "runtime.errors", "runtime.config", "runtime.logs", "runtime.atomic", "runtime.artifacts",
     "runtime.output"),
    ("runtime.knowledge",),
    ("runtime.inference",),
    ("runtime.tools",),
    ("runtime.skills",),
    ("runtime.mcp",),
    ("runtime.agent",),
    ("runtime.harness",),
    ("runtime.web",),
    ("runtime.daemon",),
    ("runtime.eval",),
    ("runtime.cli",),
)
RANK = {prefix: rank for rank, prefixes in enumerate(LAYERS) for prefix in prefixes}


def layer(module: str) -> tuple[int, str] | None:
    """(rank, prefix) of the layer `module` is in; None for a module outside agentd's packages."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        prefix = ".".join(parts[:n])
        if prefix in RANK:
            return RANK[prefix], prefix
    return None


def modules() -> dict[str, Path]:
    found = {}
    for package in ("store", "notifications", "runtime"):
        for path in (REPO / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            dotted = ".".join(path.relative_to(REPO).with_suffix("").parts)
            found[dotted.removesuffix(".__init__")] = path
    return found


def imports(path: Path, module: str) -> list[tuple[int, str]]:
    """Every module `path` imports, anywhere in it (a function's lazy import counts as much as any)."""
    out = []
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            out += [(node.lineno, f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base)
                    for alias in node.names]
    return out


MODULES = modules()


def upward_edges() -> list[str]:
    bad = []
    for module, path in sorted(MODULES.items()):
        here = layer(module)
        assert here is not None, module
        for line, target in imports(path, module):
            there = layer(target)
            if there is None:
                continue
            if there[0] > here[0] or (there[0] == here[0] and there[1] != here[1] and here[0] != RANK["runtime"]):
                bad.append(f"{path.relative_to(REPO)}:{line} {module} ({here[1]}) imports {target} ({there[1]})")
    return bad


def test_every_module_of_agentd_is_in_a_layer() -> None:
    assert all(layer(m) is not None for m in MODULES)


def test_imports_run_one_way_from_the_cli_down_to_the_store() -> None:
    bad = upward_edges()
    assert not bad, "imports that run back up:\n" + "\n".join(bad)


def test_the_layer_check_sees_an_upward_import(tmp_path: Path) -> None:
    """The check itself: a store module importing the agent loop is named."""
    path = tmp_path / "leak.py"
    path.write_text("from runtime.agent.loop import run_task\n")
    [(line, target)] = imports(path, "store.leak")
    assert line == 1 and layer(target)[0] > layer("store.leak")[0]


# -- all SQL behind the store ------------------------------------------------------------------------

# What builds a statement: a module that needs one asks a query function in store/ instead.
SQL_BUILDERS = frozenset({"select", "func", "insert", "update", "delete", "text"})


def sql_reaches(path: Path) -> list[tuple[int, str]]:
    """Where `path` imports the store's tables or sqlalchemy's statement builders: (line, what) pairs."""
    out: list[tuple[int, str]] = []
    aliases = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names
                    if a.name == "store.tables" or a.name.startswith("store.tables.")]
            aliases |= {a.asname or a.name for a in node.names if a.name.split(".")[0] == "sqlalchemy"}
        elif isinstance(node, ast.ImportFrom) and not node.level:
            base = node.module or ""
            if base == "store.tables":
                out += [(node.lineno, f"store.tables.{a.name}") for a in node.names]
            elif base == "store":
                out += [(node.lineno, "store.tables") for a in node.names if a.name == "tables"]
            elif base.split(".")[0] == "sqlalchemy":
                out += [(node.lineno, f"{base}.{a.name}") for a in node.names if a.name in SQL_BUILDERS]
    for node in ast.walk(tree):
        # `import sqlalchemy as sa` then `sa.select(...)`: the builder is reached through the module.
        if (isinstance(node, ast.Attribute) and node.attr in SQL_BUILDERS
                and isinstance(node.value, ast.Name) and node.value.id in aliases):
            out.append((node.lineno, f"{node.value.id}.{node.attr}"))
    return sorted(out)


def sql_outside_the_store() -> list[str]:
    return [
        f"{path.relative_to(REPO)}:{line} {module} imports {what}"
        for module, path in sorted(MODULES.items())
        if layer(module)[1] != "store"
        for line, what in sql_reaches(path)
    ]


def test_no_module_outside_the_store_reads_its_tables_or_builds_sql() -> None:
    bad = sql_outside_the_store()
    assert not bad, "SQL outside store/ (add a query function to store/queries/ instead):\n" + "\n".join(bad)


def test_the_sql_check_sees_a_table_import_and_a_statement_builder(tmp_path: Path) -> None:
    """The check itself: a table import, a `select` and a `sqlalchemy.func` are each named with their line."""
    path = tmp_path / "leak.py"
    path.write_text(
        "import sqlalchemy\n"
        "from sqlalchemy import Connection, select\n"
        "from store.tables import tasks\n"
        "from store import tables\n"
        "n = sqlalchemy.func.count()\n"
    )
    assert sql_reaches(path) == [
        (2, "sqlalchemy.select"), (3, "store.tables.tasks"), (4, "store.tables"), (5, "sqlalchemy.func"),
    ]
