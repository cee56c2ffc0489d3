"""Terminal output: aligned tables for people, JSON for scripts."""

from __future__ import annotations

import dataclasses
import json
import shutil
from typing import Any, Iterable, Sequence

import click


def to_jsonable(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if hasattr(obj, "_asdict"):
        return to_jsonable(obj._asdict())
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if hasattr(obj, "model_dump"):
        return obj.model_dump(mode="json")
    return obj


def echo_json(obj: Any) -> None:
    click.echo(json.dumps(to_jsonable(obj), ensure_ascii=False, indent=2))


def table(rows: Iterable[Sequence[Any]], headers: Sequence[str], *, width: int | None = None) -> str:
    """Columns sized to their content; the last column is cut to fit the terminal."""
    cells = [[_cell(v) for v in row] for row in rows]
    if not cells:
        return "(none)"
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    width = width or shutil.get_terminal_size((120, 24)).columns
    used = sum(widths[:-1]) + 2 * (len(widths) - 1)
    widths[-1] = max(len(headers[-1]), min(widths[-1], width - used))
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    for r in cells:
        lines.append("  ".join(_fit(v, w) for v, w in zip(r, widths, strict=True)).rstrip())
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    return str(value).replace("\n", " ")


def _fit(text: str, width: int) -> str:
    return text.ljust(width) if len(text) <= width else text[: max(width - 1, 0)] + "…"


def fields_table(pairs: Iterable[tuple[str, Any]]) -> str:
    pairs = list(pairs)
    key_width = max(len(k) for k, _ in pairs)
    return "\n".join(f"{k.ljust(key_width)}  {_cell(v)}" for k, v in pairs)
