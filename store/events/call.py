"""Events of a decision: what the model saw and said, what code made of it, and the tool calls."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from store.events._base import Event

ItemKind = Literal["instruction", "task_state", "evidence", "memory", "tool", "observation", "notification", "skill"]
Trust = Literal["trusted", "untrusted"]


class _Value(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class ManifestItem(_Value):
    """One block of a request: where it came from, whether it is trusted, and what it cost."""

    block: str
    kind: ItemKind
    source: str
    trust: Trust
    version: str | None = None
    sha256: str
    tokens: int = Field(ge=0)
    # What reads like instructions inside an untrusted block (an MCP tool's result saying "ignore your
    # rules"): the model sees it fenced as data all the same; a person reading the manifest sees it named.
    flags: tuple[str, ...] = ()
    # The utility a ranked block (evidence) scored: relevance x authority x freshness - penalties.
    utility: float | None = None

    @model_serializer(mode="wrap")
    def _set_fields_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Left out when empty, so every manifest recorded before flags and scores existed is written the
        # same way.
        return _without_unset(handler(self), "flags", "utility")


class LeftOut(_Value):
    """A candidate that did not go into the request, and why; a ranked one (evidence) with its score."""

    source: str
    kind: ItemKind
    tokens: int = Field(ge=0)
    reason: str
    utility: float | None = None

    @model_serializer(mode="wrap")
    def _utility_only_when_scored(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Left out when unscored, so every manifest recorded before scores existed is written the same way.
        return _without_unset(handler(self), "utility")


def _without_unset(data: dict[str, Any], *fields: str) -> dict[str, Any]:
    for name in fields:
        if data.get(name) in (None, (), []):
            data.pop(name, None)
    return data


class TokenBuckets(_Value):
    """Where the prompt's tokens went, counted with the model's own tokenizer and chat template."""

    system: int
    tool_definitions: int
    tool_results: int
    conversation: int
    total: int


class ContextManifest(_Value):
    """Exactly what one model call received: answers "what did the model actually see"."""

    decision: str
    items: tuple[ManifestItem, ...]
    total_tokens: int
    prefix_tokens: int
    prefix_sha256: str
    buckets: TokenBuckets
    window: int
    max_output: int
    overhead: int
    budget: int
    left_out: tuple[LeftOut, ...] = ()
    prompt_ref: str
    schema_sha256: str
    # "skipped (why)" where the decision searched no knowledge: an empty list of evidence would not say
    # whether nothing matched or nothing was looked for.
    retrieval: str | None = None

    @model_serializer(mode="wrap")
    def _retrieval_only_when_skipped(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Left out when None, so every manifest of a decision that searched is written as before.
        data = handler(self)
        if data.get("retrieval") is None:
            data.pop("retrieval", None)
        return data


class EvidenceItem(_Value):
    """A span of evidence as the model was shown it, with the score that got it in."""

    cite: str
    source: str
    version: str | None = None
    sha256: str
    text: str
    utility: float
    tokens: int = Field(ge=0)
    # Where a ranked section came from and what its utility is made of: the permission scope it was
    # retrieved in, and relevance x authority x freshness before the penalties. Unset for memories and
    # examples, and in items recorded before they existed, which are written the same way.
    scope: str | None = None
    relevance: float | None = None
    authority: float | None = None
    freshness: float | None = None

    @model_serializer(mode="wrap")
    def _provenance_only_when_known(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _without_unset(handler(self), "scope", "relevance", "authority", "freshness")


class ContextTrimmed(Event):
    """From this decision on, the task's requests show its history cut: the oldest `elided` tool
    results as one-line pointers, the oldest `dropped` steps not at all (both counted over the whole
    history). Recorded before the call, so every later request, a restart and a re-run cut alike, and
    the prefix breaks here once rather than at every call."""

    call_index: int = Field(ge=1)
    elided: int = Field(ge=0)
    dropped: int = Field(ge=0)
    # The request with the previous cut, and with this one, against the budget it must fit.
    tokens_before: int = Field(ge=0)
    tokens_after: int = Field(ge=0)
    budget: int = Field(ge=0)


class ContextCompacted(Event):
    """From this decision on, the task's steps through `through_call` are shown as one summary (policy
    `compact`): sections a summarizer call wrote, anchored on the summary before it. The replaced steps
    stay in the log; the call that wrote the summary is recorded here, prompt and output."""

    call_index: int = Field(ge=1)
    # The last step the summary replaces, and the log's seqs it covers (the first step's to the last result's).
    through_call: str
    first_seq: int = Field(ge=1)
    last_seq: int = Field(ge=1)
    sections: dict[str, str]
    summary_sha256: str
    # The request before the compaction and with it, against the budget.
    tokens_before: int = Field(ge=0)
    tokens_after: int = Field(ge=0)
    budget: int = Field(ge=0)
    # The summarizer's call: its model, exact prompt (by reference and hash), tokens and reply.
    model: str
    prompt_ref: str
    prompt_sha256: str
    prompt_tokens: int = Field(ge=0)
    completion_tokens: int = Field(ge=0)
    attempts: int = Field(1, ge=1)
    # Why the first reply was refused, when the summary came from the retry (its prompt says so).
    retried_for: str = ""
    output: str


class CompactionFailed(Event):
    """The summarizer could not write a valid summary (after one retry): the task goes on with its
    history cut as `auto` cuts it, never with a silently shortened transcript."""

    call_index: int = Field(ge=1)
    error: str
    prompt_tokens: int = Field(0, ge=0)
    completion_tokens: int = Field(0, ge=0)


class NoteTaken(Event):
    """A user's message read by the note-taker (policy `notes`): the one short note it kept of a standing
    rule, identifier or fact that must survive the session, or none (`note` empty). One per message,
    before the decision that first shows the message; the call is recorded here, prompt and output."""

    call_index: int = Field(ge=1)
    # The message: its block's label in the history ("request" for the goal, "request:N" after) and seq.
    message: str
    message_seq: int = Field(ge=1)
    note: str = ""
    model: str
    prompt_ref: str
    prompt_sha256: str
    prompt_tokens: int = Field(0, ge=0)
    completion_tokens: int = Field(0, ge=0)
    output: str = ""
    # Why there is no note when the call failed or its reply could not be read; the task goes on.
    error: str = ""


class EvidenceRetrieved(Event):
    """Evidence chosen for a decision, recorded with its text: a later edit of the source changes
    neither what this task was shown nor its cached prefix."""

    call_index: int = Field(ge=1)
    items: tuple[EvidenceItem, ...]
    left_out: tuple[LeftOut, ...] = ()


class ModelCalled(Event):
    call_index: int = Field(ge=1)
    attempt: int = Field(1, ge=1)
    model: str
    decision: str = "next_step"
    manifest: ContextManifest | None = None
    prompt_tokens: int = Field(ge=0)
    completion_tokens: int = Field(ge=0)
    # None when the model endpoint does not report them (llama-cpp-python's server does not).
    cached_tokens: int | None = Field(None, ge=0)
    evaluated_tokens: int | None = Field(None, ge=0)
    ttft_s: float = Field(0.0, ge=0)
    generation_s: float = Field(0.0, ge=0)
    output: str = ""
    prefix_break: str | None = None
    # Decoding is greedy; above 1 only on a retry after a reply that filled the token limit, which
    # greedy decoding otherwise writes again token for token.
    repeat_penalty: float = Field(1.0, ge=1.0)


class ProposalAccepted(Event):
    call_index: int = Field(ge=1)
    action: dict[str, Any]


class ProposalRejected(Event):
    call_index: int = Field(ge=1)
    attempt: int = Field(ge=1)
    error: str


class ToolCallProposed(Event):
    call_id: str
    tool: str
    arguments: dict[str, Any] = {}
    reason: str = ""


class ToolCallStarted(Event):
    """Recorded before a tool runs: a start with no result after a crash is an outcome nobody knows."""

    call_id: str
    tool: str
    idempotent: bool
    # The tool's declared effects: a call with external effects (a shell command, a job) may change
    # files the log will not name, so what the task knows of its workspace is no longer the whole of it.
    effects: tuple[str, ...] = ()
    # The snapshot of the files the call may change, taken just before it ran (an artifact ref): after a
    # crash, what the call changed is found by comparing the workspace with it. None: nothing recorded.
    recorded: str | None = None


class ToolCallExecuted(Event):
    call_id: str
    tool: str
    status: Literal["ok", "error", "timeout", "invalid_arguments", "refused", "denied", "outcome_unknown"]
    observation: dict[str, Any] = {}
    artifact_ref: str | None = None
    attempts: int = Field(1, ge=0)
    elapsed_s: float = Field(0.0, ge=0)


class AnswerGiven(Event):
    answer: str
    sources: tuple[str, ...] = ()


class TaskEscalated(Event):
    reason: str
