"""Tenant isolation across generated cases: a task never sees another tenant's documents or memories,
in any prompt, manifest or event of its own, while its own tenant's are found (so the check can fail)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from runtime import memory
from runtime.agent.profiles import Profile
from store.events import EvidenceRetrieved
from tests.helpers import answer, events, run, scripted_runtime, submit

CASES = 12
TOPICS = ("revoked keys", "billing plans", "backup schedule", "deploy freeze", "password reset", "rate limits")


def marker(rng: random.Random) -> str:
    # A word no document, memory or goal holds by chance, to find wherever it leaks.
    return "zq" + "".join(rng.choice("bcdfghjkmnpqrstvwxz") for _ in range(10))


def case(rng: random.Random, folder: Path):
    """Two tenants with a document and a memory each on one topic, in words a query for it shares."""
    topic = rng.choice(TOPICS)
    tenants = rng.sample(["acme", "globex", "initech", "umbrella", "hooli"], 2)
    marks = {t: (marker(rng), marker(rng)) for t in tenants}
    for n, tenant in enumerate(tenants):
        doc_mark = marks[tenant][0]
        (folder / f"{tenant}-{n}.md").write_text(
            f"---\nid: policy/{tenant}\nversion: v{rng.randint(1, 9)}\ntenants: {tenant}\n---\n"
            f"## {topic.title()}\n\n{topic} for this account: see {doc_mark}. {topic} apply to every user.\n"
        )
    return topic, tenants, marks


@pytest.mark.parametrize("seed", range(CASES))
def test_a_task_never_sees_another_tenants_documents_or_memories(store, data_dir, tmp_path, seed) -> None:
    rng = random.Random(seed)
    folder = tmp_path / "knowledge"
    folder.mkdir()
    topic, (mine, theirs), marks = case(rng, folder)
    for tenant in (mine, theirs):
        memory.propose(store, subject="ann", tenant=tenant, purpose="helpdesk", by="cli:ops", source="user_stated",
                       text=f"Ann asked about {topic} before; her reference is {marks[tenant][1]}.")
    rt = scripted_runtime(store, data_dir, [answer(f"Here is what I know about {topic}.")])
    rt.profiles["helpdesk"] = Profile(name="helpdesk", role="You answer questions.", knowledge=folder)
    task_id = submit(store, tmp_path, f"What applies to {topic} for me?", profile="helpdesk", tenant=mine)
    assert run(rt, task_id) == "completed"

    seen = "\n".join([*rt.model.prompts, *(json.dumps(r.event.model_dump(mode="json"))
                                         for r in store.read_stream(task_id))])
    for mark in marks[theirs]:
        assert mark not in seen, f"{theirs}'s {mark} reached a task of {mine}"
    # The task's own tenant's document and memory were there to be found.
    retrieved = events(store, task_id, EvidenceRetrieved)[0]
    shown = " ".join(i.text for i in retrieved.items)
    assert marks[mine][0] in shown and marks[mine][1] in shown, shown
