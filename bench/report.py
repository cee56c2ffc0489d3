"""Turning the results dictionary into the printed table and the target verdicts."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Target:
    name: str
    unit: str  # "x" for a ratio, "/s" for a rate
    minimum: float
    value: Callable[[dict], float | None]

    def check(self, result: dict) -> dict:
        value = self.value(result)
        met = value is not None and not math.isnan(value) and value >= self.minimum
        return {"name": self.name, "value": value, "target": self.minimum, "unit": self.unit, "met": met}


def _get(result: dict, *path: str) -> float | None:
    node = result
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node


def _ratio(result: dict, top: tuple[str, ...], bottom: tuple[str, ...]) -> float | None:
    a, b = _get(result, *top), _get(result, *bottom)
    return a / b if a is not None and b else None


AGENTD_SINGLE = ("agentd", "single", "per_second")
AGENTD_16 = ("agentd", "concurrent16", "per_second")
AGENTD_16_STEPS = ("agentd", "concurrent16_steps", "per_second")
AGENTD_16_UNSYNCED = ("agentd", "concurrent16_unsynced", "per_second")
LANGGRAPH_SINGLE = ("langgraph", "single", "per_second")
ES_SINGLE = ("eventsourcing", "single", "per_second")
RAW_EVENT_ROWS = ("raw_sqlite", "event_rows", "per_second")
DECODE_ONLY = ("agentd", "decode_only", "per_second")

TARGETS = [
    Target("agentd 16 writers / LangGraph puts", "x", 10, lambda r: _ratio(r, AGENTD_16, LANGGRAPH_SINGLE)),
    Target("agentd single / LangGraph puts", "x", 1, lambda r: _ratio(r, AGENTD_SINGLE, LANGGRAPH_SINGLE)),
    Target("agentd single / eventsourcing single", "x", 1, lambda r: _ratio(r, AGENTD_SINGLE, ES_SINGLE)),
    Target("agentd batched events/s", "/s", 300_000, lambda r: _get(r, "agentd", "batched", "per_second")),
    Target("agentd rebuild events/s", "/s", 300_000, lambda r: _get(r, "agentd", "rebuild", "per_second")),
]

# Ratios worth seeing next to the targets, with no target of their own.
CONTEXT_RATIOS = [
    ("agentd 16 writers, steps/s / LangGraph puts", AGENTD_16_STEPS, LANGGRAPH_SINGLE),
    ("agentd 16 writers / LangGraph 16 threads", AGENTD_16, ("langgraph", "threads16", "per_second")),
    ("agentd 16 writers without fsync / LangGraph puts", AGENTD_16_UNSYNCED, LANGGRAPH_SINGLE),
    ("agentd single / raw sqlite3 commit", AGENTD_SINGLE, ("raw_sqlite", "single_commit", "per_second")),
    ("LangGraph puts / raw sqlite3 commit", LANGGRAPH_SINGLE, ("raw_sqlite", "single_commit", "per_second")),
    ("agentd batched / raw sqlite3 event rows", ("agentd", "batched", "per_second"), RAW_EVENT_ROWS),
    ("agentd rebuild / payloads decoded", ("agentd", "rebuild", "per_second"), DECODE_ONLY),
]


def check_targets(result: dict) -> list[dict]:
    return [t.check(result) for t in TARGETS]


# -- the table ---------------------------------------------------------------------------------------

Row = tuple[str, tuple[str, ...], str]  # label, path into one size's result, format

ROWS: list[tuple[str, list[Row]]] = [
    ("agentd  ({agentd_settings})", [
        ("1. appends/s, 1 event per commit, 1 appender", AGENTD_SINGLE, "spread"),
        ("2. appends/s, 16 threads, 1 event per call", AGENTD_16, "spread"),
        ("   mean appends per commit (group commit)", ("agentd", "concurrent16", "mean_batch"), "float"),
        ("   appends/s, 16 asyncio tasks (append_async)", ("agentd", "concurrent16_async", "per_second"), "spread"),
        ("   mean appends per commit (asyncio)", ("agentd", "concurrent16_async", "mean_batch"), "float"),
        ("   appends/s, 16 threads, synchronous=off (no fsync)", AGENTD_16_UNSYNCED, "spread"),
        ("   steps/s, 16 threads, 1 step (4 events) per call", AGENTD_16_STEPS, "spread"),
        ("   mean appends per commit (steps)", ("agentd", "concurrent16_steps", "mean_batch"), "float"),
        ("3. events/s, 1000 events per append (fill to N)", ("agentd", "batched", "per_second"), "spread"),
        ("4. rebuild events/s (replay.rebuild_into)", ("agentd", "rebuild", "per_second"), "rate"),
        ("   verify events/s (replay.verify, wall)", ("agentd", "verify", "per_second"), "rate"),
        ("5. bytes per event (.db + -wal, checkpointed)", ("agentd", "size", "per_event"), "int"),
        ("   of which the events table and its indexes", ("agentd", "size", "log_per_event"), "int"),
    ]),
    ("LangGraph SqliteSaver  ({langgraph_settings})", [
        ("6. puts/s, 1 checkpoint per put, sequential", LANGGRAPH_SINGLE, "spread"),
        ("   puts/s, 16 threads (the saver's lock)", ("langgraph", "threads16", "per_second"), "spread"),
        ("   bytes per checkpoint row (.db + -wal)", ("langgraph", "size", "per_row"), "int"),
    ]),
    ("eventsourcing SQLiteApplicationRecorder  ({eventsourcing_settings})", [
        ("7. inserts/s, 1 event per insert_events", ES_SINGLE, "spread"),
        ("   events/s, 1000 per insert_events (fill to N)", ("eventsourcing", "batched", "per_second"), "rate"),
        ("   bytes per event (.db + -wal)", ("eventsourcing", "size", "per_row"), "int"),
    ]),
    ("reference", [
        ("   raw sqlite3 one-row commits/s (WAL, full)", ("raw_sqlite", "single_commit", "per_second"), "spread"),
        ("   raw sqlite3 agentd event rows/s, 1000 per commit", RAW_EVENT_ROWS, "spread"),
        ("   agentd payloads decoded/s, nothing else", DECODE_ONLY, "rate"),
    ]),
]


def _fmt(value: float | None, kind: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if kind == "float":
        return f"{value:,.1f}"
    return f"{value:,.0f}"


def _cell(result: dict, path: tuple[str, ...], kind: str) -> str:
    """A figure; for "spread", followed by the slowest and fastest of its rounds."""
    text = _fmt(_get(result, *path), kind)
    low, high = _get(result, *path[:-1], "min"), _get(result, *path[:-1], "max")
    if kind == "spread" and low is not None and high is not None:
        text += f" ({_short(low)}-{_short(high)})"
    return text


def _short(value: float) -> str:
    return f"{value / 1000:.1f}k" if value >= 1000 else f"{value:.0f}"


def _settings(results: dict, system: str) -> str:
    for result in results.values():
        s = result.get(system, {}).get("settings")
        if s:
            return f"journal_mode={s['journal_mode']}, synchronous={s['synchronous']}"
    return "not run"


def render(meta: dict, results: dict[str, dict]) -> str:
    sizes = list(results)
    label_w, col_w = 52, 24
    head = " " * label_w + "".join(f"{'N=' + format(int(n), ','):>{col_w}}" for n in sizes)
    lines = [
        f"agentd store benchmark  {meta['started_at']}",
        f"{meta['cpus']} CPUs, Python {meta['python']}, SQLite {meta['sqlite']}; "
        f"ops: {meta['ops']:,} sequential, {meta['concurrent_ops']:,} concurrent, in {meta['rounds']} "
        "interleaved rounds; (slowest-fastest round) after figures taken in rounds",
        "",
        head,
    ]
    names = {f"{k}_settings": _settings(results, k) for k in ("agentd", "langgraph", "eventsourcing")}
    for title, rows in ROWS:
        lines.append(title.format(**names))
        for label, path, kind in rows:
            cells = "".join(f"{_cell(results[n], path, kind):>{col_w}}" for n in sizes)
            lines.append(f"  {label:<{label_w - 2}}{cells}")
    lines += ["", head + f"{'target':>{col_w}}"]
    lines.append("targets")
    for i, target in enumerate(TARGETS):
        cells = ""
        for n in sizes:
            verdict = results[n]["targets"][i]
            cells += f"{_verdict(verdict):>{col_w}}"
        want = f">= {target.minimum:,.0f}{'x' if target.unit == 'x' else '/s'}"
        lines.append(f"  {target.name:<{label_w - 2}}{cells}{want:>{col_w}}")
    lines.append("context (no target)")
    for name, top, bottom in CONTEXT_RATIOS:
        cells = "".join(f"{_fmt_ratio(_ratio(results[n], top, bottom)):>{col_w}}" for n in sizes)
        lines.append(f"  {name:<{label_w - 2}}{cells}")
    return "\n".join(lines)


def _fmt_ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f}x"


def _verdict(v: dict) -> str:
    if v["value"] is None:
        return "- (not run)"
    shown = f"{v['value']:,.2f}x" if v["unit"] == "x" else f"{v['value']:,.0f}"
    return f"{shown} {'met' if v['met'] else 'not met'}"
