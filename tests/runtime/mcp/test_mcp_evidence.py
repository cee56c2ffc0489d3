"""An MCP server's resources and argument-free prompts as evidence: read at start where the config asks,
retrieved within the tenant's scope and the evidence budget like the knowledge folder's documents,
fenced as data, and recorded in the manifest with the server, the uri and the text's hash."""

from __future__ import annotations

import hashlib

import pytest

from runtime.mcp_settings import McpSettings
from store.events import EvidenceRetrieved, ModelCalled
from tests.helpers import answer, events, run, scripted, submit
from tests.helpers.mcp_server import RUNBOOK, RUNBOOK_KEY
from tests.helpers.mcp_servers import MCP_PROFILE, opened, profiles, stdio

QUESTION = "Why does my API key answer 401 key_revoked?"
CITE_ID = "mcp:test:notes://runbooks/api-keys"


def evidence_settings(tenants=("acme",), profile: str = MCP_PROFILE.name) -> McpSettings:
    return McpSettings.model_validate({
        "servers": {"test": stdio(evidence={"tenants": list(tenants)})},
        "profiles": {profile: {"evidence": ["test"]}},
    })


@pytest.fixture
def ws(release_workspace):
    return release_workspace


def test_a_servers_resource_is_shown_as_fenced_evidence_with_its_server_uri_and_hash(store, ws, tmp_path) -> None:
    version = hashlib.sha256(RUNBOOK.encode()).hexdigest()[:12]
    cite = f"{CITE_ID}@{version}#revoked-keys"
    rt = scripted(store, tmp_path, [answer("The key was revoked: rotate it.", cite)], profiles=profiles())
    with opened(evidence_settings(), rt.tools, store=store) as g:
        rt.mcp = g
        task_id = submit(store, ws, QUESTION, profile=MCP_PROFILE.name, tenant="acme")
        assert run(rt, task_id) == "completed"
    prompt = rt.model.prompts[0]
    fence = prompt[prompt.index(f'<data id="{cite}"'):]
    fence = fence[:fence.index("</data>")]
    assert 'trust="untrusted"' in fence and "key_revoked" in fence
    assert "Rate limits" not in prompt, "a section that earns too little stays out"
    [called] = events(store, task_id, ModelCalled)
    [item] = [i for i in called.manifest.items if i.source.startswith("mcp:")]
    assert (item.source, item.version) == (CITE_ID, version)
    [retrieved] = events(store, task_id, EvidenceRetrieved)
    [shown] = [i for i in retrieved.items if i.source == CITE_ID]
    revoked = RUNBOOK.split("## Rate limits")[0].split("\n", 1)[1].strip()
    assert shown.text == revoked and shown.sha256 == hashlib.sha256(revoked.encode()).hexdigest()


def test_a_key_in_a_servers_resource_is_shown_and_recorded_only_redacted(store, ws, tmp_path) -> None:
    rt = scripted(store, tmp_path, [answer("Wait, then retry.")], profiles=profiles())
    with opened(evidence_settings(), rt.tools, store=store) as g:
        rt.mcp = g
        task_id = submit(store, ws, "What does a 429 with retry_after mean for my key's rate?",
                         profile=MCP_PROFILE.name, tenant="acme")
        assert run(rt, task_id) == "completed"
    prompt = rt.model.prompts[0]
    assert "The load-test key\n[secret:1] is exempt." in prompt
    [retrieved] = events(store, task_id, EvidenceRetrieved)
    assert [i for i in retrieved.items if "[secret:1]" in i.text]
    assert RUNBOOK_KEY not in prompt
    store.close()
    assert [p for p in tmp_path.rglob("*") if p.is_file() and RUNBOOK_KEY.encode() in p.read_bytes()] == []


def test_another_tenants_task_is_never_shown_a_servers_evidence(store, ws, tmp_path) -> None:
    rt = scripted(store, tmp_path, [answer("I do not know.")], profiles=profiles())
    with opened(evidence_settings(), rt.tools, store=store) as g:
        rt.mcp = g
        task_id = submit(store, ws, QUESTION, profile=MCP_PROFILE.name, tenant="globex")
        assert run(rt, task_id) == "completed"
    assert CITE_ID not in rt.model.prompts[0]
    [called] = events(store, task_id, ModelCalled)
    assert all(not i.source.startswith("mcp:") for i in called.manifest.items)
    assert all(not lo.source.startswith("mcp:") for lo in called.manifest.left_out), "not even a rejected candidate"


def test_only_the_prompts_that_need_no_argument_are_read_and_only_for_the_profiles_named(store) -> None:
    with opened(evidence_settings(tenants=("*",))) as g:
        docs = {d.ref: d for d, _ in g.evidence(MCP_PROFILE.name)}
        assert set(docs) == {"notes://runbooks/api-keys", "prompt:triage"}
        assert docs["prompt:triage"].text.startswith("Triage a ticket by reading")
        assert g.evidence("workspace") == []


def test_evidence_for_a_profile_from_a_server_without_an_evidence_table_is_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match=r"profiles.support.evidence: 'test' must be a server of mcp.servers "
                                         r"with an \[mcp.servers.test.evidence\] table"):
        McpSettings.model_validate({"servers": {"test": stdio()}, "profiles": {"support": {"evidence": ["test"]}}})
