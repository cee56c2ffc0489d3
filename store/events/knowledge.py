"""Events of the knowledge base: documents added, each at one version, their text kept by hash."""

from __future__ import annotations

from pydantic import Field

from store.events._base import Event

KNOWLEDGE_STREAM = "knowledge"


class DocumentAdded(Event):
    """A document at one version: its text is in the artifact store under `sha256`, its chunks in the
    knowledge index, which is derived from these events and can be built again from them at any time.

    The same id added again with other text is a new version; the one before stays citable but is
    superseded, as are the versions named in `supersedes`. `tenants` and `scope` are who may retrieve
    it: "*" in tenants is every tenant.
    """

    doc_id: str = Field(min_length=1, max_length=200)
    version: str = Field(min_length=1, max_length=100)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    source: str = Field(min_length=1)
    tenants: tuple[str, ...] = Field(min_length=1)
    scope: str = Field(pattern=r"^[a-z0-9][a-z0-9:_.-]{0,99}$")
    authority: float = Field(ge=0.0, le=1.0)
    supersedes: tuple[str, ...] = ()
