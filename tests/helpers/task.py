"""A task on a scripted model: a runtime to run it, submitting and running it, reading its events back,
and the replies a script is made of."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import anyio

from runtime.agent.loop import Runtime, run_task
from runtime.agent.plugins import load
from runtime.artifacts import ArtifactStore
from runtime.harness.tasks import say, submit_task
from runtime.inference.scripted import ScriptedModel
from runtime.skills.tools import register_skill_tools
from runtime.tools import Tool
from store import NO_STREAM, EventStore

EVERYTHING = ("read", "write", "external")

# What a task asks when its test does not care what: the date in the release notes' notes.txt.
RELEASE_QUESTION = "What date is the release? Read notes.txt."
# A summary with every section filled, as a compacting task's summarizer call returns it.
SUMMARY = {
    "session_goal": "Read every note.",
    "decisions": "read the notes in order, one per step",
    "rejected_options": "none",
    "open_questions": "none",
    "next_steps": "read the remaining notes, then answer",
}


def scripted_runtime(
    store: EventStore,
    data_dir: Path,
    replies: Sequence[dict],
    *,
    plugins: Iterable[str] = (),
    tools: Iterable[Tool] = (),
    artifacts: ArtifactStore | None = None,
    **kw: Any,
) -> Runtime:
    """A runtime on a scripted model whose artifacts live in `data_dir/artifacts`, as agentd's own do,
    unless `artifacts` says otherwise."""
    loaded = load(list(plugins))
    for tool in tools:
        loaded.tools.register(tool)
    return Runtime(
        store=store,
        model=ScriptedModel(list(replies)),
        tools=loaded.tools,
        profiles=loaded.profiles,
        artifacts=artifacts or ArtifactStore(data_dir / "artifacts"),
        protected=(data_dir,),
        **{"rerankers": loaded.rerankers, **kw},
    )


def make_runtime(store: EventStore, model, tmp_path: Path, profiles=None, tools=()) -> Runtime:
    """A runtime on `model` with the built-in tools, `tools` and `profiles` added; its artifacts live in
    `tmp_path/artifacts`."""
    loaded = load([])
    for tool in tools:
        loaded.tools.register(tool)
    return Runtime(
        store=store,
        model=model,
        tools=loaded.tools,
        profiles={**loaded.profiles, **(profiles or {})},
        artifacts=ArtifactStore(tmp_path / "artifacts"),
        protected=(tmp_path / "data",),
    )


def scripted(store, tmp_path, replies, **kw) -> Runtime:
    return make_runtime(store, ScriptedModel(replies), tmp_path, **kw)


def framing_runtime(store: EventStore, tmp_path: Path, replies, *, plugins=(), skill_roots=()) -> Runtime:
    """A runtime on a scripted model, which keeps each call's prompt and output schema, with the skill
    tools registered."""
    loaded = load(list(plugins))
    register_skill_tools(loaded.tools)
    return Runtime(
        store=store,
        model=ScriptedModel(replies),
        tools=loaded.tools,
        profiles=loaded.profiles,
        artifacts=ArtifactStore(tmp_path / "artifacts"),
        protected=(tmp_path / "data",),
        skill_roots=tuple(skill_roots),
    )


def submit(store: EventStore, workspace: Path, goal: str = RELEASE_QUESTION, **kw: Any) -> str:
    task_id = f"t-{len(store.tasks()) + 1}"
    store.append(task_id, submit_task(goal, workspace, **kw), expected_version=NO_STREAM, actor="ann")
    return task_id


def run(rt: Runtime, task_id: str, **kw: Any) -> str:
    return anyio.run(lambda: run_task(rt, task_id, **kw))


def events(store: EventStore, task_id: str, kind) -> list:
    return [r.event for r in store.read_stream(task_id) if isinstance(r.event, kind)]


def call(tool: str, **arguments: Any) -> dict:
    return {"action": "call_tool", "tool": tool, "arguments": arguments, "reason": "test"}


def answer(text: str, *sources: str) -> dict:
    return {"action": "final_answer", "answer": text, "sources": list(sources)}


def options(schema: dict) -> dict[str, dict]:
    """The schema's alternatives by action (and tool, for call_tool)."""
    out = {}
    for o in schema["anyOf"]:
        p = o["properties"]
        key = p["action"]["const"] + (f":{p['tool']['const']}" if "tool" in p else "")
        out[key] = p
    return out


def tell(store, task_id: str, text: str) -> None:
    records = store.read_stream(task_id)
    store.append(task_id, say(records, text), expected_version=records[-1].stream_version, actor="ann")


def user_turn(prompt: str) -> str:
    return prompt.rsplit("<|im_start|>user", 1)[1]
