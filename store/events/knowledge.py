"""Events of the knowledge base: documents added, each at one version, their text kept by hash."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from store.events._base import Event

KNOWLEDGE_STREAM = "knowledge"


class DocumentAdded(Event):
    """A document at one version: its text is in the artifact store under `sha256`, its chunks in the
    knowledge index, which is derived from these events and can be built again from them at any time.

    The same id added again with other text is a new version; the one before stays citable but is
    superseded, as are the versions named in `supersedes`. `tenants` and `scope` are who may retrieve
    it: "*" in tenants is every tenant.

    An `example` is a few-shot example rather than evidence: shown only to a task whose profile is at
    `policy_version` (an example of another policy can teach the wrong boundary), for the decision it
    illustrates (`decision`, a tool or an action), never cited.
    """

    doc_id: str = Field(min_length=1, max_length=200)
    version: str = Field(min_length=1, max_length=100)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    source: str = Field(min_length=1)
    tenants: tuple[str, ...] = Field(min_length=1)
    scope: str = Field(pattern=r"^[a-z0-9][a-z0-9:_.-]{0,99}$")
    authority: float = Field(ge=0.0, le=1.0)
    supersedes: tuple[str, ...] = ()
    kind: Literal["document", "example"] = "document"
    policy_version: str | None = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9@:_.+-]{0,99}$")
    decision: str | None = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9/:_.-]{0,99}$")

    @model_validator(mode="after")
    def _an_example_names_its_policy_version(self) -> DocumentAdded:
        if self.kind == "example" and self.policy_version is None:
            raise ValueError("an example names the policy_version it is valid for")
        return self

    @model_serializer(mode="wrap")
    def _example_fields_only_for_examples(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Left out for a document, so that every document is recorded as it was before examples existed.
        data = handler(self)
        if data.get("kind") == "document":
            del data["kind"]
            for key in ("policy_version", "decision"):
                if data.get(key) is None:
                    data.pop(key, None)
        return data
