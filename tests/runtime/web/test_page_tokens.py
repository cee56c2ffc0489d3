"""Where a task's tokens went, on its page: a chart of each call's buckets and the running totals, drawn
server-side as inline SVG from the same accounting `agentd task show --buckets` prints."""

from __future__ import annotations

import html
import re

import pytest

from runtime.agent.accounting import Accounting, CallTokens
from runtime.web.views import CHART_TOP, token_chart
from store import EventStore
from store.events import CompactionFailed, ModelCalled, TokenBuckets
from tests.helpers.page import login, manifest, submit

# Two calls, every bucket non-empty; the second evaluated only what the cache did not hold.
ACCOUNTING = Accounting(
    calls=(
        CallTokens(1, 1, system=100, tool_definitions=50, tool_results=20, conversation=30, total=200, left_out=0,
                   billed=200, evaluated=200),
        CallTokens(2, 1, system=100, tool_definitions=50, tool_results=60, conversation=190, total=400, left_out=0,
                   billed=600, evaluated=300),
    ),
    billed=600, evaluated=300, unused_tool_definitions=100, unused_tools=("shell",),
)
WIDTH, HEIGHT = 400, 200 + CHART_TOP  # 200 units to draw in: a token is half a unit high in the bars


def heights(bar: dict) -> list[tuple[str, float]]:
    return [(r["bucket"], r["height"]) for r in bar["rects"]]


def test_each_calls_bar_stacks_its_buckets_in_order_from_the_bottom_in_proportion_to_the_largest_request() -> None:
    chart = token_chart(ACCOUNTING, WIDTH, HEIGHT)
    first, second = chart["bars"]
    assert heights(first) == [("system", 50), ("tool_definitions", 25), ("tool_results", 10), ("conversation", 15)]
    assert heights(second) == [("system", 50), ("tool_definitions", 25), ("tool_results", 30), ("conversation", 95)]
    # Each part sits on the one below it; the largest request reaches the top of the drawing area.
    for bar in chart["bars"]:
        bottom = HEIGHT
        for r in bar["rects"]:
            assert r["y"] + r["height"] == pytest.approx(bottom)
            bottom = r["y"]
    assert second["rects"][-1]["y"] == CHART_TOP
    # Side by side, one slot each, never overlapping.
    assert first["rects"][0]["x"] + first["rects"][0]["width"] < second["rects"][0]["x"]
    assert all(r["x"] == first["rects"][0]["x"] for r in first["rects"])


def test_the_running_totals_are_lines_on_their_own_scale_ending_at_the_final_figures() -> None:
    chart = token_chart(ACCOUNTING, WIDTH, HEIGHT)
    # Billed, the larger total, ends at the top; evaluated at its share of it; both start from nothing.
    after_first = round(HEIGHT - 200 * 200 / 600, 1)
    assert chart["billed"] == [(0, HEIGHT), (100, after_first), (300, CHART_TOP)]
    assert chart["evaluated"] == [(0, HEIGHT), (100, after_first), (300, HEIGHT - 100)]
    billed, evaluated = chart["labels"]
    assert (billed["line"], billed["value"], evaluated["line"], evaluated["value"]) == ("billed", 600, "evaluated", 300)
    # Billed's label over its line, evaluated's under its own: they cannot overlap.
    assert billed["y"] < CHART_TOP < chart["evaluated"][-1][1] < evaluated["y"] <= HEIGHT


def test_a_chart_of_calls_that_all_counted_nothing_draws_flat_and_divides_by_nothing() -> None:
    empty = CallTokens(1, 1, 0, 0, 0, 0, total=0, left_out=0, billed=0, evaluated=0)
    chart = token_chart(Accounting((empty, empty), 0, 0, 0, ()), WIDTH, HEIGHT)
    assert [bar["rects"] for bar in chart["bars"]] == [[], []]
    assert {y for _, y in chart["billed"] + chart["evaluated"]} == {HEIGHT}


def test_a_call_without_a_manifest_shows_its_whole_prompt_as_not_measured() -> None:
    bare = CallTokens(1, 1, 0, 0, 0, 0, total=120, left_out=0, billed=120, evaluated=120)
    chart = token_chart(Accounting((bare,), 120, 120, 0, ()), WIDTH, HEIGHT)
    assert heights(chart["bars"][0]) == [("unmeasured", 200)]
    assert chart["legend"][-1] == "unmeasured"


# -- on the page --------------------------------------------------------------------------------


def tokens_section(page: str) -> str:
    return page.split("<h2>Tokens</h2>")[1].split("<h2>")[0]


def test_the_task_page_charts_each_model_call_and_the_totals_billed_and_evaluated(
    app, store: EventStore, token, workspace
) -> None:
    task_id = submit(store, workspace)
    second = manifest().model_copy(update={
        "buckets": TokenBuckets(system=140, tool_definitions=80, tool_results=30, conversation=50, total=300),
    })
    store.append(task_id, [
        # The first endpoint did not report evaluated tokens: what the cache did not hold (260 - 200) counts.
        ModelCalled(call_index=1, model="test-model", manifest=manifest(), prompt_tokens=260, completion_tokens=30,
                    cached_tokens=200),
        ModelCalled(call_index=2, model="test-model", manifest=second, prompt_tokens=300, completion_tokens=20,
                    cached_tokens=260, evaluated_tokens=40),
        CompactionFailed(call_index=3, error="no summary", prompt_tokens=900, completion_tokens=50),
    ])
    response = login(app, token).get(f"/tasks/{task_id}")
    assert response.status_code == 200
    section = tokens_section(response.text)
    text = " ".join(html.unescape(section).split())
    assert section.count('<g class="call">') == 2 and section.count("<svg") == 1
    # Every bar's figures are in its hover title, so the chart reads without its colours.
    titles = re.findall(r"<title>([^<]*)</title>", section)
    assert titles == [
        "call 1, try 1: system 140, tool definitions 80, tool results 0, conversation 40, total 260, left out 900; "
        "billed so far 260, evaluated so far 60",
        "call 2, try 1: system 140, tool definitions 80, tool results 30, conversation 50, total 300, left out 900; "
        "billed so far 560, evaluated so far 100",
    ]
    # The first call had no tool results: three parts; the second four.
    bars = section.split('<g class="call">')[1:]
    assert [b.count("<rect") for b in bars] == [3, 4]
    assert section.count("<polyline") == 2
    assert "billed 560</text>" in section and "evaluated 100</text>" in section
    assert (
        "Tokens billed 560, evaluated 100; 160 on definitions of tools never called (shell); "
        "1 compaction call(s): 900 read, 50 written."
    ) in text
    # Drawn by the server within the page's policy: no script, no inline style.
    assert "<script" not in section and "style=" not in response.text


def test_a_task_the_model_has_not_been_called_for_says_so_instead_of_a_chart(app, store, token, workspace) -> None:
    task_id = submit(store, workspace)
    section = tokens_section(login(app, token).get(f"/tasks/{task_id}").text)
    assert "no model calls yet" in section and "<svg" not in section
