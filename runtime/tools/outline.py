"""A file's countable parts, counted by code for read_file's result: a JSON file's items, a Python
module's functions and classes, a text file's list items under each heading.

Asked how many functions a module defined, or how many people a JSON file listed, the default model
counted what it read and was wrong in 3 of 6 count cases of an unseen generated suite ("how many
functions" was answered with one function's name in the held-out project). It copies a figure out of
a result well; read_file already counts a CSV file's records (`data_rows`) for that reason.
"""

from __future__ import annotations

import ast
import json
import re

# Bounds on what a result shows: a large file's outline still costs a few lines.
MAX_NAMES = 30
MAX_KEYS = 8
MAX_SECTIONS = 8

_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+\S")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$")


def outline(name: str, content: str) -> dict[str, str] | None:
    """What `content` (the text of the file `name`) holds that a question may ask to count, each figure
    with what it counts; None where there is nothing of the kind."""
    suffix = name.lower().rpartition(".")[2] if "." in name.rpartition("/")[2] else ""
    if suffix == "json":
        found = _json(content)
    elif suffix == "py":
        found = _python(content)
    elif suffix in ("md", "markdown", "txt", "rst", ""):
        found = _lists(content)
    else:
        found = {}
    return found or None


def _named(names: list[str]) -> str:
    """"3 (a, b, c)": the count first, so the figure is not left to counting the names."""
    shown = ", ".join(names[:MAX_NAMES]) + (", ..." if len(names) > MAX_NAMES else "")
    return f"{len(names)} ({shown})" if names else "0"


def _json(content: str) -> dict[str, str]:
    try:
        data = json.loads(content)
    except ValueError:
        return {}
    if isinstance(data, list):
        return {"items": str(len(data))}
    if not isinstance(data, dict):
        return {}
    lists = [(k, v) for k, v in data.items() if isinstance(v, (list, dict))][:MAX_KEYS]
    return {"keys": str(len(data)), **{f"items in {k}": str(len(v)) for k, v in lists}}


def _python(content: str) -> dict[str, str]:
    try:
        tree = ast.parse(content)
    except (SyntaxError, ValueError):
        return {}
    functions = [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    out = {"functions": _named(functions)}
    if classes:
        out["classes"] = _named([c.name for c in classes])
        for c in classes[:MAX_KEYS]:
            methods = [n.name for n in c.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
            out[f"methods of {c.name}"] = _named(methods)
    return out if functions or classes else {}


def _lists(content: str) -> dict[str, str]:
    """List items counted under each heading that has any ("top" before the first heading)."""
    counts: dict[str, int] = {}
    section = "top"
    for line in content.splitlines():
        heading = _HEADING.match(line)
        if heading:
            section = heading.group(1)
        elif _LIST_ITEM.match(line):
            counts[section] = counts.get(section, 0) + 1
    if not counts or sum(counts.values()) < 2:
        return {}
    if list(counts) == ["top"]:
        return {"list items": str(counts["top"])}
    shown = list(counts.items())[:MAX_SECTIONS]
    return {f"list items under {s!r}" if s != "top" else "list items before the first heading": str(n)
            for s, n in shown}
