"""The knowledge base: documents added as events, chunks in FTS5, retrieved within tenant and scope."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from runtime.agent.profiles import Profile
from runtime.artifacts import ArtifactStore
from runtime.errors import InvalidCommand
from runtime.knowledge import evidence
from runtime.knowledge.base import KnowledgeBase, folder_scope
from runtime.knowledge.evidence import CHUNK_WORDS, chunks_of
from store.events import KNOWLEDGE_STREAM, DocumentAdded, EvidenceRetrieved
from tests.helpers import answer, events, run, scripted_runtime, submit
from tests.helpers.cli import one_error_line

RUNBOOK = """---
id: runbook/keys
version: v1
---
# API keys

## Revoked keys

A revoked key never comes back. Offer a rotation, which a person approves.

## Rate limits

Too many requests answer 429; wait a minute.
"""


REVOKED = "runbook/keys@v1#revoked-keys"


@pytest.fixture
def base(store, data_dir: Path):
    kb = KnowledgeBase(store, ArtifactStore(data_dir / "artifacts"), data_dir / "knowledge.db")
    yield kb
    kb.close()


def doc(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)
    return folder / name


def cites(sections) -> list[str]:
    return [s.cite for s in sections]


def test_a_document_is_added_as_an_event_and_found_by_its_sections(base, store, tmp_path) -> None:
    [added] = base.add_paths([doc(tmp_path / "docs", "keys.md", RUNBOOK)], tenants=["acme"], scope=None, by="cli:me")
    assert (added.doc_id, added.version, added.chunks, added.new) == ("runbook/keys", "v1", 2, True)
    [rec] = store.read_stream(KNOWLEDGE_STREAM)
    assert isinstance(rec.event, DocumentAdded) and rec.actor == "cli:me"
    assert (rec.event.tenants, rec.event.scope) == (("acme",), "general")
    found = base.candidates("my key was revoked", tenant="acme", scopes=["general"])
    assert cites(found)[0] == "runbook/keys@v1#revoked-keys"


def test_the_same_text_again_adds_nothing_and_changed_text_is_a_new_version_the_old_one_superseded(
    base, store, tmp_path
) -> None:
    path = doc(tmp_path / "docs", "keys.md", RUNBOOK)
    base.add_paths([path], tenants=["acme"], scope=None, by="cli:me")
    [again] = base.add_paths([path], tenants=["acme"], scope=None, by="cli:me")
    assert not again.new and len(store.read_stream(KNOWLEDGE_STREAM)) == 1
    path.write_text(RUNBOOK.replace("never comes back", "never comes back, not even on request"))
    [changed] = base.add_paths([path], tenants=["acme"], scope=None, by="cli:me")
    assert changed.new and changed.version.startswith("v1+")
    found = base.candidates("revoked key", tenant="acme", scopes=["general"])
    new, old = (next(s for s in found if s.cite.startswith(f"runbook/keys@{v}#revoked"))
                for v in (changed.version, "v1"))
    assert new.current and not old.current, "the old version stays citable, superseded"
    packed = evidence.retrieve(found, tenant="acme", query="revoked key", exclude=set(), budget=1000, limit=3,
                                count=len)
    assert [c.section.cite for c in packed.selected][0] == new.cite
    assert old.cite not in [c.section.cite for c in packed.selected], "freshness keeps the old version out"


def test_another_tenants_or_another_scopes_chunks_are_never_candidates(base, tmp_path) -> None:
    # Many generated documents over two tenants and two scopes, searched with their own words: a chunk
    # acme may not read never comes back, however well it matches.
    rng = random.Random(28)
    words = "key plan invoice rotation refund outage quota region backup token".split()
    for n in range(60):
        tenant = rng.choice(["acme", "globex", "*"])
        scope = rng.choice(["general", "billing"])
        body = " ".join(rng.choices(words, k=12))
        name = f"d{n}-{tenant.strip('*') or 'all'}-{scope}"
        path = doc(tmp_path / "gen", f"{name}.md", f"---\nid: {name}\n---\n## S\n\n{body}\n")
        base.add_paths([path], tenants=[tenant], scope=scope, by="cli:me")
    for _ in range(40):
        query = " ".join(rng.sample(words, 3))
        found = base.candidates(query, tenant="acme", scopes=["general"], limit=20)
        assert found, query
        for s in found:
            assert "globex" not in s.doc_id and s.doc_id.endswith("-general"), (query, s.cite)


def test_a_profiles_folder_changed_while_agentd_runs_is_seen_at_the_next_decision(base, tmp_path) -> None:
    folder = tmp_path / "knowledge"
    doc(folder, "keys.md", RUNBOOK)
    scope = folder_scope(folder)
    base.sync(folder, scope=scope)
    assert cites(base.candidates("outage status page", tenant="acme", scopes=[scope])) == []
    doc(folder, "outages.md", "---\nid: runbook/outages\n---\n## Outage\n\nSee the status page during an outage.\n")
    base.sync(folder, scope=scope)
    assert cites(base.candidates("outage status page", tenant="acme", scopes=[scope])) == [
        "runbook/outages@v1#outage"
    ]
    assert base.candidates("outage", tenant="acme", scopes=["general"]) == [], "a folder is its profile's own"


def test_the_index_is_built_again_from_the_log_when_it_is_lost(store, data_dir, tmp_path) -> None:
    artifacts = ArtifactStore(data_dir / "artifacts")
    first = KnowledgeBase(store, artifacts, data_dir / "knowledge.db")
    first.add_paths([doc(tmp_path / "docs", "keys.md", RUNBOOK)], tenants=["acme"], scope=None, by="cli:me")
    before = cites(first.candidates("revoked rate", tenant="acme", scopes=["general"]))
    first.close()
    for f in data_dir.glob("knowledge.db*"):
        f.unlink()
    again = KnowledgeBase(store, artifacts, data_dir / "knowledge.db")
    assert cites(again.candidates("revoked rate", tenant="acme", scopes=["general"])) == before != []
    again.close()


def test_a_long_section_is_cut_at_paragraph_boundaries() -> None:
    paragraph = " ".join(["word"] * (CHUNK_WORDS // 2 + 10))
    chunks = chunks_of("guide", "v1", f"## Setup\n\n{paragraph}\n\n{paragraph}\n\n{paragraph}\n")
    assert [c.cite for c in chunks] == ["guide@v1#setup", "guide@v1#setup-2", "guide@v1#setup-3"]
    assert all(c.text == paragraph for c in chunks)
    [whole] = chunks_of("notes", "v1", "Holiday policy: 25 days a year.\n")
    assert (whole.cite, whole.text) == ("notes@v1#holiday-policy-25-days-a-year", "Holiday policy: 25 days a year.")


def test_bad_input_adds_nothing(base, store, tmp_path) -> None:
    good = doc(tmp_path / "docs", "keys.md", RUNBOOK)
    binary = tmp_path / "docs" / "blob.txt"
    binary.write_bytes(b"\xff\xfe\x00")
    vague = doc(tmp_path / "docs", "vague.md", "---\nid: vague\nauthority: high\n---\n## A\n\ntext\n")
    cases = [
        ([good, vague], ["acme"], None, "vague.md: authority 'high' is not a number"),
        ([good, tmp_path / "missing.md"], ["acme"], None, "no such file or folder"),
        ([good, binary], ["acme"], None, "not UTF-8 text"),
        ([good], ["Acme Corp"], None, "tenant 'Acme Corp'"),
        ([good], ["acme"], "Billing Dept", "scope 'Billing Dept'"),
        ([tmp_path / "empty"], ["acme"], None, "no such file"),
    ]
    for paths, tenants, scope, message in cases:
        with pytest.raises(InvalidCommand, match=message):
            base.add_paths(paths, tenants=tenants, scope=scope, by="cli:me")
    assert store.read_stream(KNOWLEDGE_STREAM) == []


def test_a_support_task_is_shown_only_its_tenants_documents(store, data_dir, tmp_path) -> None:

    folder = tmp_path / "knowledge"
    doc(folder, "keys.md", RUNBOOK.replace("id: runbook/keys", "id: runbook/keys\ntenants: acme"))
    doc(folder, "globex.md", "---\nid: policy/globex\ntenants: globex\n---\n## Revoked keys\n\nGlobex: revoked key.\n")
    rt = scripted_runtime(store, data_dir, [answer("A revoked key never comes back.", REVOKED)])
    rt.profiles["helpdesk"] = Profile(name="helpdesk", role="You answer questions.", knowledge=folder)
    task_id = submit(store, tmp_path, "Why was my key revoked?", profile="helpdesk", tenant="acme")
    run(rt, task_id)
    [retrieved] = events(store, task_id, EvidenceRetrieved)
    considered = [i.cite for i in retrieved.items] + [o.source for o in retrieved.left_out]
    assert [i.cite for i in retrieved.items] == [REVOKED]
    assert not any("globex" in c for c in considered)
    # Each item says where it came from and what its utility is made of.
    [item] = retrieved.items
    assert item.scope == folder_scope(folder) and (item.authority, item.freshness) == (1.0, 1.0)
    assert item.utility == pytest.approx(item.relevance * item.authority * item.freshness, abs=1e-3)


def test_the_cli_adds_lists_and_searches_and_refuses_bad_input_in_one_line(agentd, tmp_path) -> None:
    path = doc(tmp_path / "docs", "keys.md", RUNBOOK)
    added = agentd("knowledge", "add", str(path), "--tenant", "acme", "--scope", "support")
    assert added.returncode == 0 and added.stdout == "added runbook/keys@v1 (2 chunks)\n"
    listed = agentd("knowledge", "list")
    assert "runbook/keys  v1       acme     support" in listed.stdout
    found = agentd("knowledge", "search", "revoked key", "--tenant", "acme", "--scope", "support")
    assert found.stdout.splitlines()[1].startswith("runbook/keys@v1#revoked-keys") and "selected" in found.stdout
    other = agentd("knowledge", "search", "revoked key", "--tenant", "globex", "--scope", "support")
    assert "runbook" not in other.stdout
    # Bad input, as click's usage errors are: exit 2.
    one_error_line(agentd("knowledge", "add", str(path), "--tenant", "acme", "--authority", "3"), "authority 3.0",
                   code=2)
    one_error_line(agentd("knowledge", "add", str(tmp_path / "nope.md"), "--tenant", "acme"), "no such file", code=2)
    assert agentd("knowledge", "add", str(path)).returncode == 2, "--tenant is required"


def test_knowledge_search_packs_by_the_evidence_weights_of_agentd_toml(agentd, data_dir, tmp_path) -> None:
    path = doc(tmp_path / "docs", "keys.md", RUNBOOK)
    assert agentd("--data-dir", str(data_dir), "knowledge", "add", str(path), "--tenant", "acme").returncode == 0
    config = tmp_path / "agentd.toml"
    config.write_text("[evidence]\nbudget_tokens = 1\n")
    found = agentd("--data-dir", str(data_dir), "knowledge", "search", "revoked key", "--tenant", "acme",
                   env={"AGENTD_CONFIG": str(config)})
    assert found.returncode == 0, found.stderr
    assert "over the evidence budget (0 + 28 > 1 tokens)" in found.stdout, found.stdout
    assert found.stdout.splitlines()[-1] == "0 selected, 0 of 1 tokens (estimated)"


def test_a_bad_document_in_a_profiles_folder_is_left_out_and_the_rest_still_found(base, tmp_path) -> None:
    folder = tmp_path / "knowledge"
    doc(folder, "keys.md", RUNBOOK)
    doc(folder, "vague.md", "---\nid: vague\nauthority: high\n---\n## Revoked\n\nrevoked key\n")
    base.sync(folder, scope="profile:support")
    assert {s.doc_id for s in base.candidates("revoked key", tenant="acme", scopes=["profile:support"])} == {
        "runbook/keys"
    }


def test_a_secret_in_a_document_is_indexed_and_retrieved_only_as_redacted(base, data_dir, tmp_path) -> None:
    key = "sk-live-4f9a0c21d4e8b7a6c5d3"
    text = RUNBOOK.replace("Offer a rotation", f"The old key was {key}. Offer a rotation")
    base.add_paths([doc(tmp_path / "docs", "keys.md", text)], tenants=["acme"], scope=None, by="cli:me")
    [found] = [s for s in base.candidates("revoked key rotation", tenant="acme", scopes=["general"])
               if s.cite == REVOKED]
    assert key not in found.text and "[redacted:" in found.text and "Offer a rotation" in found.text
    base.close()
    for path in [data_dir / "knowledge.db", *(data_dir / "artifacts").rglob("*")]:
        if path.is_file():
            assert key.encode() not in path.read_bytes(), path


RERANKING_PLUGIN = '''
from runtime.agent.profiles import Profile


def rate_limits_first(query, sections):
    # A second stage that knows better than term overlap: here, that a 429 is what the user means.
    return [1.0 if "429" in s.text else 0.05 for s in sections]


def register(tools, profiles, rerankers):
    rerankers["limits"] = rate_limits_first
    profiles["helpdesk"] = Profile(name="helpdesk", role="You answer questions.", knowledge=KNOWLEDGE,
                                   reranker="limits")
'''


def test_a_plugins_reranker_scores_the_candidates_a_profile_is_shown(store, data_dir, tmp_path) -> None:
    folder = tmp_path / "knowledge"
    doc(folder, "keys.md", RUNBOOK)
    plugin = tmp_path / "reranking.py"
    plugin.write_text(RERANKING_PLUGIN.replace("KNOWLEDGE", repr(str(folder))))
    limits = "runbook/keys@v1#rate-limits"
    goal = "Why was my revoked key refused after many requests?"
    rt = scripted_runtime(store, data_dir, [answer("Wait a minute.", limits)], plugins=[str(plugin)])
    task_id = submit(store, tmp_path, goal, profile="helpdesk")
    run(rt, task_id)
    [retrieved] = events(store, task_id, EvidenceRetrieved)
    assert [i.cite for i in retrieved.items] == [limits]
    # Both sections were BM25's candidates, and term overlap alone ranks the revoked-keys one first.
    candidates = rt.sections(rt.profiles["helpdesk"], "default", goal)
    alone = evidence.retrieve(candidates, tenant="default", query=goal, exclude=set(), budget=500, limit=3,
                              count=lambda t: len(t.split()))
    assert sorted(s.cite for s in candidates) == [limits, REVOKED]
    assert alone.selected[0].section.cite == REVOKED


def test_a_profile_naming_a_reranker_nobody_registered_is_refused_at_load(tmp_path) -> None:
    from runtime.agent import plugins
    from runtime.errors import ConfigError

    plugin = tmp_path / "unranked.py"
    plugin.write_text(RERANKING_PLUGIN.replace("KNOWLEDGE", "None").replace('rerankers["limits"] = ', "_ = "))
    with pytest.raises(ConfigError, match="names reranker 'limits', which no plugin registers"):
        plugins.load([plugin])


def test_a_reranker_that_scores_out_of_range_is_a_config_error_not_a_silent_ranking() -> None:
    from runtime.errors import ConfigError

    sections = evidence.document_sections("d", "v1", "D", "## A\n\nalpha\n\n## B\n\nbeta\n", frozenset({"*"}), 1.0)
    with pytest.raises(ConfigError, match="one in 0..1 for each"):
        evidence.retrieve(sections, tenant="acme", query="alpha", exclude=set(), budget=500, limit=3,
                          count=lambda t: len(t.split()), rerank=lambda q, ss: [2.0 for _ in ss])


def test_two_profiles_reading_one_folder_are_both_shown_its_documents(store, data_dir, tmp_path) -> None:
    folder = tmp_path / "knowledge"
    doc(folder, "keys.md", RUNBOOK)
    rt = scripted_runtime(store, data_dir, [answer("It never comes back.", REVOKED)] * 2)
    for name in ("helpdesk", "escalations"):
        rt.profiles[name] = Profile(name=name, role="You answer questions.", knowledge=folder)
    for name in ("helpdesk", "escalations"):
        task_id = submit(store, tmp_path, "Why was my key revoked?", profile=name)
        assert run(rt, task_id) == "completed"
        [retrieved] = events(store, task_id, EvidenceRetrieved)
        assert [i.cite for i in retrieved.items] == [REVOKED], name


def test_the_same_text_added_to_another_scope_is_placed_there_as_a_new_version(base, tmp_path) -> None:
    path = doc(tmp_path / "docs", "keys.md", RUNBOOK)
    base.add_paths([path], tenants=["acme"], scope="support", by="cli:me")
    [moved] = base.add_paths([path], tenants=["acme"], scope="billing", by="cli:me")
    assert moved.new and moved.version == "v1+" + moved.version.split("+")[1]
    assert cites(base.candidates("revoked key", tenant="acme", scopes=["billing"]))[0].startswith("runbook/keys@v1+")
    [again] = base.add_paths([path], tenants=["acme"], scope="billing", by="cli:me")
    assert not again.new


def test_evidence_all_left_out_is_recorded_with_why_none_was_shown(store, data_dir, tmp_path) -> None:
    folder = tmp_path / "knowledge"
    doc(folder, "keys.md", RUNBOOK)
    rt = scripted_runtime(store, data_dir, [answer("I cannot tell from what I was shown.")])
    rt.profiles["helpdesk"] = Profile(name="helpdesk", role="You answer questions.", knowledge=folder)
    # No section fits in a budget of one token: every candidate is considered and none is shown.
    rt.evidence_weights = rt.evidence_weights.model_copy(update={"budget_tokens": 1})
    task_id = submit(store, tmp_path, "Why was my revoked key refused?", profile="helpdesk")
    run(rt, task_id)
    [retrieved] = events(store, task_id, EvidenceRetrieved)
    assert retrieved.items == ()
    assert REVOKED in [o.source for o in retrieved.left_out]
    assert all(o.kind == "evidence" and o.reason for o in retrieved.left_out)
