"""What a tool promises: its contract, the context a call runs in, and the errors it may answer with."""

from __future__ import annotations

import dataclasses
import enum
import os
import re
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from runtime.artifacts import ArtifactStore
from runtime.errors import ToolError
from runtime.secrets import Vault
from runtime.tools.schema import inline_schema
from store.events import Event

# The executor writes these into every observation, so an output field by the same name would be shadowed.
RESERVED_KEYS = frozenset(
    {"tool", "status", "error", "message", "details", "attempts", "artifact_ref", "truncated", "full_chars", "diff"}
)

_CODE = re.compile(r"[a-z][a-z0-9_]*")


class Effect(str, enum.Enum):
    """What a call may change. A tool with no effects only computes."""

    READ = "read"
    WRITE = "write"
    EXTERNAL = "external"
    # Records what agentd remembers of the task's user, for their later tasks: no file changes.
    MEMORY = "memory"


class ToolFailure(ToolError):
    """A ToolError with a short code the model and the log can branch on, and a few typed details."""

    def __init__(self, code: str, message: str, details: Mapping[str, Any] | None = None) -> None:
        if not _CODE.fullmatch(code):
            raise ValueError(f"error code {code!r} must be snake_case")
        self.code = code
        self.message = message
        self.details = dict(details or {})
        super().__init__(f"{code}: {message}")


class ToolRefused(ToolFailure):
    """The call names something outside the caller's scope or is not allowed; nothing was done."""


class ToolContract(BaseModel):
    """Everything the model and the runtime need to know about a tool before calling it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,63}$")
    description: str = Field(min_length=1, description="what it does and when to use it rather than another tool")
    input_model: type[BaseModel]
    output_model: type[BaseModel]
    effects: tuple[Effect, ...] = Field(description="stored sorted, so definitions do not depend on set order")
    idempotent: bool = Field(description="safe to run twice; only these are retried")
    needs_approval: bool = False
    scope: str = Field(min_length=1, description='what a call may touch, e.g. "workspace", "task", "tenant"')
    timeout_s: float = Field(gt=0)
    preconditions: tuple[str, ...] = ()
    errors: dict[str, str] = Field(default_factory=dict, description="error code -> when the tool answers with it")
    summary_fields: tuple[str, ...] = Field((), description="output fields a masked observation keeps")
    mask_output: bool = Field(True, description="False for tools whose output is already bounded pages")
    path_kind: Literal["file", "folder"] | None = Field(
        None,
        description="the `path` argument names an existing file or folder, which the call only reads: "
        "the grammar offers the paths the task knows of and has not read yet",
    )
    removes: tuple[str, str] | None = Field(
        None,
        description="(A, B): a call replaces the text of argument A by argument B in the file at `path`, at the "
        "places `runtime.tools.replacement` finds; A empty: the whole file is replaced by argument B. What a "
        "call would remove is then known before it runs",
    )
    adds: str | None = Field(
        None,
        description="the argument whose lines a call adds to the file at `path`, keeping every line it has: what "
        "a call would add is then known before it runs",
    )
    needs: Literal["artifact", "skill"] | None = Field(
        None,
        description="what the task must hold before a call can do anything: an artifact_ref from an earlier "
        "result, or a skill it activated; until then the tool is not offered",
    )
    changes: Literal["path", "workspace"] | None = Field(
        None,
        description="which files a call may change: only the one its `path` argument names, or any file in "
        "the workspace; by default any, for a tool with the write or external effect, and none otherwise. "
        "agentd records those files before and after each call, so the change can be shown and undone",
    )

    @field_validator("effects")
    @classmethod
    def _sorted_effects(cls, effects: tuple[Effect, ...]) -> tuple[Effect, ...]:
        return tuple(sorted(set(effects), key=lambda e: e.value))

    @field_validator("errors")
    @classmethod
    def _codes(cls, errors: dict[str, str]) -> dict[str, str]:
        bad = [code for code in errors if not _CODE.fullmatch(code)]
        if bad:
            raise ValueError(f"error codes must be snake_case: {bad}")
        return dict(sorted(errors.items()))

    @model_validator(mode="after")
    def _consistent(self) -> ToolContract:
        if self.input_model.model_config.get("extra") != "forbid":
            # Otherwise an invented argument would be accepted and silently ignored.
            raise ValueError(f"{self.name}: input model {self.input_model.__name__} must forbid extra fields")
        fields = set(self.output_model.model_fields)
        if clash := fields & RESERVED_KEYS:
            raise ValueError(f"{self.name}: output fields {sorted(clash)} clash with observation keys")
        if unknown := set(self.summary_fields) - fields:
            raise ValueError(f"{self.name}: summary fields {sorted(unknown)} are not output fields")
        if self.removes is not None and not {n for n in self.removes if n} <= set(self.input_model.model_fields):
            raise ValueError(f"{self.name}: removes names arguments the tool does not take: {self.removes}")
        if self.adds is not None and self.adds not in self.input_model.model_fields:
            raise ValueError(f"{self.name}: adds names an argument the tool does not take: {self.adds}")
        if self.changes == "path" and "path" not in self.input_model.model_fields:
            raise ValueError(f"{self.name}: changes='path' needs a `path` argument")
        if self.changes is not None and not {Effect.WRITE, Effect.EXTERNAL} & set(self.effects):
            raise ValueError(f"{self.name}: a tool that changes files needs the write or external effect")
        return self

    @property
    def may_change(self) -> Literal["path", "workspace"] | None:
        """Which files a call may change, as declared or as its effects imply."""
        if self.changes is not None:
            return self.changes
        return "workspace" if {Effect.WRITE, Effect.EXTERNAL} & set(self.effects) else None

    def definition(self) -> dict[str, Any]:
        """The tool as the model sees it; plain JSON data with no process-dependent order."""
        return {
            "name": self.name,
            "description": self.description,
            "effects": [e.value for e in self.effects],
            "errors": dict(self.errors),
            "idempotent": self.idempotent,
            "input_schema": inline_schema(self.input_model),
            "needs_approval": self.needs_approval,
            "output_schema": inline_schema(self.output_model),
            "preconditions": list(self.preconditions),
            "scope": self.scope,
            "timeout_s": self.timeout_s,
        }


@dataclasses.dataclass(frozen=True)
class ToolContext:
    """Who calls, for which task, in which workspace, and the trusted facts a tool may check arguments against.

    `facts` come from application state (the log), never from the model. `protected` names folders
    inside the workspace that file tools must not touch (pass the data directory); the artifact
    store's root is always among them. The executor derives one
    context per attempt (`for_call`) carrying that attempt's deadline, cancel flag and artifact trail.
    """

    task_id: str
    tenant: str
    actor: str
    workspace: Path
    artifacts: ArtifactStore
    facts: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    protected: tuple[Path, ...] = dataclasses.field(default=(), compare=False)
    deadline: float | None = dataclasses.field(default=None, compare=False)
    cancelled: threading.Event = dataclasses.field(default_factory=threading.Event, compare=False, repr=False)
    trail: list[Event] = dataclasses.field(default_factory=list, compare=False, repr=False)
    # The task's vault: the executor puts secrets back into a call's arguments from it right before the
    # tool runs, and hides them again in what the tool returns. None: placeholders stay as written.
    secrets: Vault | None = dataclasses.field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        # Containment checks compare resolved paths, so the root must be resolved too.
        object.__setattr__(self, "workspace", Path(os.path.realpath(self.workspace)))
        object.__setattr__(self, "facts", MappingProxyType(dict(self.facts)))
        # The data directory often sits inside the workspace; a file tool must not edit the log under it.
        protected = {Path(os.path.realpath(p)) for p in (*self.protected, self.artifacts.root)}
        object.__setattr__(self, "protected", tuple(sorted(protected)))

    def with_facts(self, **facts: Any) -> ToolContext:
        return dataclasses.replace(self, facts={**self.facts, **facts})

    def for_call(self, timeout_s: float) -> ToolContext:
        return dataclasses.replace(
            self, deadline=time.monotonic() + timeout_s, cancelled=threading.Event(), trail=[]
        )

    def record(self, event: Event) -> None:
        """Note a file the call read or wrote; the executor hands these to the caller for the log."""
        self.trail.append(event)

    def remaining(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    def should_stop(self) -> bool:
        """True once the executor gave up on this call; long-running tools poll it and clean up."""
        remaining = self.remaining()
        return self.cancelled.is_set() or (remaining is not None and remaining <= 0)


A = TypeVar("A", bound=BaseModel)
Out = TypeVar("Out", bound=BaseModel)


class Tool(Generic[A, Out]):
    """A contract plus the code behind it. Subclasses set `contract` and implement `run`.

    `authorize` and `check` raise ToolFailure; the executor turns that into a refusal or a
    postcondition failure. Neither may have side effects.
    """

    contract: ToolContract

    @property
    def name(self) -> str:
        return self.contract.name

    def authorize(self, ctx: ToolContext, args: A) -> None:
        """Refuse (raise ToolRefused) when an argument names something outside the caller's scope."""

    def run(self, ctx: ToolContext, args: A) -> Out:
        raise NotImplementedError

    def check(self, output: Out) -> None:
        """Postconditions beyond what the output model's own constraints already enforce."""

    def summarize(self, output: Out) -> dict[str, Any]:
        """What a masked observation keeps of `output`; the full output goes to the artifact store."""
        return output.model_dump(mode="json", include=set(self.contract.summary_fields))
