"""Steps 3 to 5 of a decision: evidence and matching lines, the tools offered, and the request for one attempt,
built from the log alone so that a replay builds the same one."""

from __future__ import annotations

import dataclasses
import hashlib
import re
from typing import Mapping, Sequence

from runtime import content, memory
from runtime.agent import claims, context, goal, notes, policy as policy_, proposal, relevance, retrieval
from runtime.agent.blocks import Block
from runtime.agent.choices import Choices, choices_for
from runtime.agent.host import Runtime, Trusted
from runtime.agent.profiles import Profile, catalog_block, output_contract, prefix_blocks
from runtime.agent.rules import asked_for
from runtime.agent.view import TaskView
from runtime.artifacts import ref_for
from runtime.errors import ContextOverflow
from runtime.evidence_weights import DEFAULT as DEFAULT_WEIGHTS
from runtime.knowledge import evidence
from runtime.mcp.tool import contract_of
from runtime.skills import activation
from runtime.skills.review import instruction_flags
from runtime.tools import ToolContext, ToolContract
from runtime.tools.finder import best_lines
from runtime.tools.memory import Scope
from runtime.tools.schema import inline_schema
from store.events import ContentMatched, ContextTrimmed, EvidenceItem, LeftOut, MatchedLine, Recorded


def injection_risk(section: evidence.Section, weight: float = DEFAULT_WEIGHTS.injection_risk) -> float:
    """What a section's instruction-like or role-imitating text costs its utility: a runbook that gives
    orders to the reader is worth less as evidence, and, shown, still data."""
    return weight if instruction_flags(section.text) else 0.0


def retrieve_evidence(
    rt: Runtime, trusted: Trusted, transcript: context.Transcript
) -> tuple[tuple[EvidenceItem, ...], tuple[LeftOut, ...]]:
    """Steps 3 and 4: evidence the tenant may see, not yet shown, ranked by utility, packed in budget,
    in the order it is shown: the examples first, the best match last. Memories are loaded at every
    decision; the knowledge is searched only where `retrieval.skipped` finds a reason to."""
    last_read = transcript.last_read
    observation = transcript.results[last_read.label].observation if last_read else {}
    query = " ".join([trusted.submitted.goal, *_result_words(observation)])
    remembered, forgotten = recall(rt, trusted, set(transcript.evidence_ids))
    if retrieval.skipped(trusted.profile, transcript, transcript.calls + 1, mcp=rt.mcp is not None):
        return remembered, forgotten
    sections = rt.sections(trusted.profile, trusted.tenant, query)
    shown, refused = retrieval.examples(rt, trusted, query, set(transcript.evidence_ids), offered_tools(rt, trusted))
    remembered, forgotten = remembered + shown, forgotten + refused
    if not sections:
        return remembered, forgotten
    weights = rt.evidence_weights
    packed = evidence.retrieve(
        sections,
        tenant=trusted.tenant,
        query=query,
        exclude=set(transcript.evidence_ids),
        budget=weights.budget_tokens,
        limit=weights.per_decision,
        count=rt.model.count,
        min_utility=weights.min_utility,
        min_share=weights.min_share,
        risk=lambda s: injection_risk(s, weights.injection_risk),
        rerank=rt.rerankers[trusted.profile.reranker] if trusted.profile.reranker else None,
        weights=weights,
    )
    # Shown best last, next to the decision: measured on the default model with an injected on-call note
    # after the runbook section, it answered right and cited the note.
    items = tuple(
        EvidenceItem(
            cite=c.section.cite,
            source=c.section.doc_id,
            version=c.section.version,
            sha256=hashlib.sha256(c.section.text.encode()).hexdigest(),
            text=c.section.text,
            utility=c.utility,
            tokens=c.tokens,
            scope=c.section.scope or None,
            relevance=c.relevance,
            authority=c.section.authority,
            freshness=c.freshness,
        )
        for c in reversed(packed.selected)
    )
    left_out = tuple(
        LeftOut(source=c.section.cite, kind="evidence", tokens=c.tokens, reason=reason, utility=c.utility)
        for c, reason in packed.left_out
    )
    return remembered + items, forgotten + left_out


MEMORY_PER_DECISION = 5
MEMORY_BUDGET = 400


def memory_purposes(profile: Profile) -> tuple[str, ...]:
    """The purposes of the memories a profile's tasks load; what they remember serves the first."""
    return profile.memory_purposes or (profile.name,)


def memory_scope(rt: Runtime, trusted: Trusted) -> Scope:
    """What `remember` records a task's memories for (its tool context's trusted fact): the profile's
    purpose, the settings' retention, the data folder's secret patterns."""
    return Scope(memory_purposes(trusted.profile)[0], rt.memory_retention_days, rt.secrets.patterns)


def recall(rt: Runtime, trusted: Trusted, shown: set[str]) -> tuple[tuple[EvidenceItem, ...], tuple[LeftOut, ...]]:
    """What agentd remembers for this decision: the memories of the task's subject (who submitted it) in
    its tenant, for the profile's purposes, current and of a known source, not shown yet; fenced as
    data like any evidence, a model's inference labelled as a hypothesis. The rest is left out with the
    check that refused it, except another subject's or tenant's, whose existence is not this task's to know."""
    loaded = memory.load(
        memory.from_rows(rt.store.memories(subject=trusted.actor, tenant=trusted.tenant)),
        subject=trusted.actor, tenant=trusted.tenant,
        purposes=memory_purposes(trusted.profile), now=trusted.now,
    )
    items: list[EvidenceItem] = []
    left_out = [LeftOut(source=f"memory:{r.memory_id}", kind="memory", tokens=0, reason=r.why) for r in loaded.left_out]
    used = 0
    hypothesis = "Hypothesis, inferred by a model, unverified"
    for m, label in [(m, "Remembered") for m in loaded.facts] + [(m, hypothesis) for m in loaded.hypotheses]:
        cite = f"memory:{m.memory_id}"
        if cite in shown:
            continue
        text = f"{label} ({m.source}, {m.created_at[:10]}, purpose {m.purpose}): {m.text}"
        tokens = rt.model.count(text)
        if len(items) >= MEMORY_PER_DECISION or used + tokens > MEMORY_BUDGET:
            left_out.append(LeftOut(source=cite, kind="memory", tokens=tokens, reason="over the memory budget"))
            continue
        used += tokens
        items.append(EvidenceItem(
            cite=cite, source=f"memory:{m.source}", sha256=hashlib.sha256(text.encode()).hexdigest(), text=text,
            utility=0.5 if label == hypothesis else 1.0, tokens=tokens,
        ))
    return tuple(items), tuple(left_out)


_NOT_WORDS = frozenset({"tool", "status", "sha256", "artifact_ref"})
_DATE = re.compile(r"^\d{4}-\d\d-\d\d")


def _result_words(observation: dict) -> list[str]:
    """What a tool result says, for the next retrieval query: its text values, not its field names
    (every result has "status", "tool", ids and dates, which would match any document). Read from the
    recorded observation: the block the model reads is `key: value` lines, field names and all, and as
    a query those names outweighed the one word that mattered (measured: "revoked" among a dozen)."""
    words: list[str] = []

    def walk(value) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                if k not in _NOT_WORDS:
                    walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)
        elif isinstance(value, str) and not _DATE.match(value):
            words.append(value)

    walk(observation)
    return words


MATCHED_LINES = 5


def match_content(ctx: ToolContext, request: str, entries: Sequence[str]) -> ContentMatched | None:
    """Where a request names none of the workspace's files, the lines that best match its words: a
    small model otherwise picks the file whose name looks likely and answers from it (measured on the
    default model: 0 of 10 "which file says ..." cases of an unseen generated suite). A request that
    writes out a file's name, of the workspace or a new one, says where to look or write, and lines of
    look-alike files would only lead it away."""
    wanted = content.words(request)
    if not wanted or relevance.names_a_file(request, [e for e in entries if not e.endswith("/")]):
        return None
    found, indexed, _ = best_lines(ctx, " ".join(wanted), MATCHED_LINES)
    if not found:
        return None
    lines = tuple(MatchedLine(path=f.path, line=f.line, text=f.text, score=f.score) for f in found)
    return ContentMatched(words=tuple(wanted), matches=lines, files=indexed)


def offered_tools(rt: Runtime, trusted: Trusted, has_skills: bool = False, view: TaskView | None = None) -> list[str]:
    """The profile's tools whose effects the task was allowed; the rest are not even described.

    A task with skills in its catalog is offered the skill tools too, on the same terms: a skill's
    scripts run only for a task allowed external effects. A sub-task is offered only the tools its
    parent gave it. A tool the profile offers on request is described once a message of the user's
    asks for what it does (`view`: the task's messages so far; without it, the goal alone): until
    then its definition would only draw a small model to it, and every other task's request stays as
    it was.
    """
    allowed = set(trusted.submitted.allowed_effects)
    names = [*trusted.profile.tools, *(activation.SKILL_TOOLS if has_skills else ()), *mcp_tools(rt, trusted, view)]
    only = trusted.submitted.tools
    on_request = trusted.profile.on_request
    said = [b[0].text for _, _, b in view.transcript.messages] if view else [
        goal.blocks(trusted.submitted.goal)[0].text
    ]
    return [
        name
        for name in dict.fromkeys(names)
        if name in rt.tools and {e.value for e in rt.tools.get(name).contract.effects} <= allowed
        and (only is None or name in only)
        and (name not in on_request or any(asked_for(name, on_request[name], goal.own_words(m), view) for m in said))
    ]


def mcp_tools(rt: Runtime, trusted: Trusted, view: TaskView | None = None) -> list[str]:
    """The MCP tools the task may be offered: those it pinned, once it has; before, those its profile's
    allowlist names among the servers' tools (none where no server is configured or none is allowed)."""
    if view is not None and view.mcp_pinned is not None:
        return [t.name for t in view.mcp_pinned.tools]
    if rt.mcp is None:
        return []
    return rt.mcp.allowed(trusted.profile.name, trusted.profile.mcp_tools)


def definitions(rt: Runtime, offered: Sequence[str], view: TaskView) -> list[dict]:
    """The offered tools' definitions, a pinned MCP tool's as its task pinned it: a server that changed
    it while agentd was down must not change what a resumed task is shown (its calls are refused)."""
    found = rt.tools.definitions(offered)
    if view.mcp_pinned is None:
        return found
    pinned = {t.name: t for t in view.mcp_pinned.tools}
    return [contract_of(pinned[d["name"]]).definition() if d["name"] in pinned else d for d in found]


def build_request(
    rt: Runtime,
    trusted: Trusted,
    records: Sequence[Recorded],
    call_index: int,
    attempt: int,
    kind: str,
    *,
    store_prompt: bool,
) -> tuple[context.Request, dict, Choices]:
    """`request_for` the task as `records` leave it."""
    return request_for(rt, trusted, TaskView.of(records), call_index, attempt, kind, store_prompt=store_prompt)


def request_for(
    rt: Runtime,
    trusted: Trusted,
    view: TaskView,
    call_index: int,
    attempt: int,
    kind: str,
    *,
    store_prompt: bool,
    cut: policy_.Cut | None = None,
) -> tuple[context.Request, dict, Choices]:
    """Step 5: the request for one attempt of one decision, from the events before it.

    A pure function of the log, the profile and the tools (the step's evidence and notifications are
    in the log already), so replay builds exactly the request the runner built. `store_prompt` keeps the prompt text in
    the artifact store; replay only needs its reference.
    """
    profile = trusted.profile
    pinned = view.pinned
    offered = offered_tools(rt, trusted, has_skills=bool(pinned and pinned.entries), view=view)
    transcript, summary = view.transcript, view.summary
    # The tools offered to the task stay in the prefix for all its requests, so that llama.cpp can
    # reuse it; what may be chosen at this step is narrowed in the grammar alone.
    prefix = prefix_blocks(profile, definitions(rt, offered, view), skills=catalog_block(pinned))
    # A retry says why the last reply was refused; the history before the tail is the same either way.
    tail = context.tail_blocks(transcript, summary, call_index, attempt, view.last_rejection if attempt > 1 else "")
    window, max_output = rt.model.n_ctx, profile.max_output_tokens
    budget = context.budget_of(window, max_output)
    last = transcript.trimmed
    if last is not None and transcript.compaction is not None and last.call_index < transcript.compaction.call_index:
        # A cut counts the steps of the history it was made on; a compaction since made another history.
        last = None
    # The policy measures the request it settles on and assembly measures it again: the same text,
    # tokenized once.
    counted: dict[str, int] = {}

    def count(text: str) -> int:
        if text not in counted:
            counted[text] = rt.model.count(text)
        return counted[text]

    chosen = policy_.parse(trusted.submitted.policy)
    # The notes no policy leaves out: after the stable prefix, or with `pinned_tail` just before the
    # decision asked for, where a new note breaks no cached prefix.
    head: tuple[Block, ...] = ()
    if chosen.notes and transcript.notes:
        if chosen.pinned_tail:
            tail = [*tail[:-1], notes.block(transcript.notes, "pinned"), tail[-1]]
        else:
            head = (notes.block(transcript.notes, "notes"),)
    shown = policy_.apply(
        chosen,
        transcript.entries,
        transcript.results,
        measure=lambda history: count(rt.model.render(context.layout(prefix, (*head, *history), tail))),
        budget=budget,
        count=count,
        # The cut recorded last, unless a re-assembly under another policy carries its own.
        cut=cut if cut is not None else policy_.Cut(last.elided, last.dropped) if last else policy_.Cut(),
        summary=(frozenset(transcript.compacted), transcript.summary) if transcript.summary is not None else None,
    )
    usable = choices_for(
        offered, view, attempt, kind,
        escalation=profile.escalation and (not profile.escalate_only_when_blocked or bool(view.calls.blocked)),
        contracts={name: rt.tools.get(name).contract for name in offered}, shown=shown,
        answer_after=profile.answer_after, call_first=profile.call_first, on_request=profile.on_request,
    )
    usable = dataclasses.replace(
        usable, attempt=attempt,
        # The head of the matched lines is agentd's words too: seen on the default model, "The project
        # keeps the release notes in the workspace's 18 files with most of the request's words".
        said=(*instruction_texts(profile, [rt.tools.get(n).contract for n in offered], tail),
              *(b.text.partition("\n")[0] for b in transcript.entries if b.label == "matches")),
        changes_allowed=bool(claims.CHANGING & set(trusted.submitted.allowed_effects)),
        contracts={name: rt.tools.get(name).contract for name in usable.tools},
    )
    schema = proposal.schema(
        {name: _arguments(rt.tools.get(name).contract, usable.narrowed(name)) for name in usable.tools},
        skills=list(usable.skills),
        allow_answer=usable.answer,
        citable=usable.sources,
        allow_escalate=usable.escalation,
        results=bool(transcript.results),
        answer_opens=usable.answer_opens,
    )
    request = context.assemble(
        prefix=prefix,
        history=(*head, *shown.entries),
        step=transcript.calls + 1,
        tail=tail,
        render=rt.model.render,
        count=count,
        window=window,
        max_output=max_output,
        decision=kind,
        schema=schema,
        prompt_ref=(lambda text: rt.artifacts.put(text.encode())) if store_prompt else (
            lambda text: ref_for(text.encode())
        ),
        left_out=(
            *activation.catalog_left_out(pinned), *transcript.evidence_left_out.get(call_index, ()), *shown.left_out
        ),
    )
    skipped = retrieval.skipped(profile, transcript, call_index, mcp=rt.mcp is not None)
    if skipped is not None:
        request = dataclasses.replace(
            request, manifest=request.manifest.model_copy(update={"retrieval": f"skipped ({skipped})"})
        )
    if shown.new_cut_from is not None:
        request = dataclasses.replace(request, trimmed=ContextTrimmed(
            call_index=call_index, elided=shown.cut.elided, dropped=shown.cut.dropped,
            tokens_before=shown.new_cut_from, tokens_after=request.manifest.total_tokens, budget=budget,
        ))
    return request, schema, usable


def request_tokens(rt: Runtime, trusted: Trusted, view: TaskView, call_index: int, kind: str, budget: int) -> int:
    """The tokens of the decision's first request as the history stands, before any new cut `auto`
    would make of it; over the budget when it cannot be built at all."""
    try:
        request, _, _ = request_for(rt, trusted, view, call_index, 1, kind, store_prompt=False)
    except ContextOverflow:
        return budget + 1
    return request.trimmed.tokens_before if request.trimmed is not None else request.manifest.total_tokens


def _arguments(contract, values: Mapping[str, tuple[str, ...]]) -> dict:
    """A tool's argument schema for this step, each argument in `values` narrowed to those values: where
    the task knows every path there is, a path is one it may still usefully name, so no guessed path
    can be written; a command is one the request gave to run."""
    schema = inline_schema(contract.input_model)
    properties = dict(schema["properties"])
    for name, allowed in values.items():
        narrowed = {"type": "string", "enum": list(allowed)}
        if "description" in properties[name]:
            narrowed["description"] = properties[name]["description"]
        properties[name] = narrowed
    return {**schema, "properties": properties}


def instruction_texts(profile: Profile, contracts: Sequence[ToolContract], tail: Sequence[Block]) -> tuple[str, ...]:
    """agentd's own words in a request, which an answer may not copy: the profile's instructions (not its
    examples, whose answers are meant to be followed), each tool's description, the output contract and
    the decision asked for, without the user's request that the decision repeats."""
    texts = [profile.role, *profile.policy, *profile.tool_guidance, output_contract(profile.escalation)]
    texts += [c.description for c in contracts]
    for block in tail:
        if block.label == "decision":
            texts.append(block.text.split("\nThe request: ")[0] + "\n" + block.text.rpartition("\n")[2])
    return tuple(texts)
