"""What running a task needs, one per process, and who is asking: the runtime and the trusted context."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from runtime.agent import progress as progress_
from runtime.agent.profiles import Profile
from runtime.artifacts import ArtifactStore
from runtime.evidence_weights import Weights
from runtime.inference.model import Model
from runtime.knowledge import evidence
from runtime.knowledge.base import KnowledgeBase, folder_scope
from runtime.secrets import Secrets
from runtime.tools import ToolContext, ToolRegistry, snapshot
from store import EventStore
from store.events import TaskSubmitted

if TYPE_CHECKING:  # the SDK is imported only where a server is configured
    from runtime.mcp.gateway import Gateway

APPROVAL_TTL = timedelta(hours=24)


class JobHost(Protocol):
    """What runs the background jobs a task starts (the harness's JobRunner): the loop only carries it
    for the process that owns it, which recovers jobs a crash left and closes it at the end."""

    def recover(self) -> list[str]: ...

    def close(self) -> None: ...


@dataclass
class Runtime:
    """What running a task needs; one per process."""

    store: EventStore
    model: Model
    tools: ToolRegistry
    profiles: dict[str, Profile]
    artifacts: ArtifactStore
    protected: tuple[Path, ...] = ()
    jobs: JobHost | None = None  # runs what start_job starts, when this process offers it
    skill_roots: tuple[Path, ...] = ()
    skills_budget_tokens: int = 1024
    approval_ttl: timedelta = APPROVAL_TTL
    progress: progress_.Reporter = progress_.ignore  # what a running decision is doing, for people to watch
    # How much of a workspace is recorded before a call that may change it; more waits for a person.
    record_limit: snapshot.Limit = snapshot.Limit()
    # The MCP servers whose tools are in `tools`, when any are configured.
    mcp: Gateway | None = None
    # The knowledge index's file (derived from the log); None: built in memory when first searched.
    knowledge_index: Path | None = None
    # The rerankers plugins registered, by name; a profile's `reranker` picks one.
    rerankers: dict[str, evidence.Reranker] = field(default_factory=dict)
    # What evidence is worth to a decision and how much a request may hold ([evidence] in agentd.toml).
    evidence_weights: Weights = field(default_factory=Weights)
    # How many days a memory of each purpose lasts when its writer names no expiry (memory_retention_days).
    memory_retention_days: dict[str, int] = field(default_factory=dict)
    _knowledge: KnowledgeBase | None = None
    _mcp_sections: dict[str, list[evidence.Section]] = field(default_factory=dict)
    # The last whole-workspace snapshot per workspace: the next one reads only the files that changed.
    _snapshots: dict[Path, snapshot.Snapshot] = field(default_factory=dict)

    def last_snapshot(self, ctx: ToolContext) -> snapshot.Snapshot | None:
        return self._snapshots.get(ctx.workspace)

    def remember(self, ctx: ToolContext, taken: snapshot.Snapshot) -> None:
        if taken.paths is None:
            self._snapshots[ctx.workspace] = taken

    def sections(self, profile: Profile, tenant: str, query: str) -> list[evidence.Section]:
        """The evidence candidates for `query` a profile's task for `tenant` may be shown: the knowledge
        base's best chunks in the tenant's and the profile's scopes (its own folder synced in first, so a
        changed document is seen at once), then the MCP servers' resources and prompts the config gives it."""
        found: list[evidence.Section] = []
        scopes = list(profile.knowledge_scopes)
        if profile.knowledge is not None:
            self.knowledge_base.sync(profile.knowledge, scope=folder_scope(profile.knowledge))
            scopes.append(folder_scope(profile.knowledge))
        found += self.knowledge_base.candidates(query, tenant=tenant, scopes=scopes)
        if self.mcp is not None:
            if profile.name not in self._mcp_sections:
                self._mcp_sections[profile.name] = [
                    s for doc, terms in self.mcp.evidence(profile.name)
                    for s in evidence.document_sections(
                        doc.doc_id, doc.sha256[:12], doc.title, doc.text, frozenset(terms.tenants), terms.authority
                    )
                ]
            found += self._mcp_sections[profile.name]
        return found

    @property
    def secrets(self) -> Secrets:
        """The data folder's vault key and secret patterns: the artifact store's, which seals with them."""
        return self.artifacts.secrets

    @property
    def knowledge_base(self) -> KnowledgeBase:
        if self._knowledge is None:
            self._knowledge = KnowledgeBase(self.store, self.artifacts, self.knowledge_index)
        return self._knowledge


@dataclass(frozen=True)
class Trusted:
    """Step 1: who is asking and about what, read from the store; never from the model."""

    task_id: str
    actor: str
    tenant: str
    now: datetime
    submitted: TaskSubmitted
    profile: Profile
