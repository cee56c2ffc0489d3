"""Context assembly: the request for one decision, rebuilt from the log, with its manifest.

A request is two messages: the stable prefix (the system message), then one user message holding the
task's history (the request, facts, evidence, notifications, skills, each step taken and its result,
in the order they happened) and a tail (a refusal on a retry, the decision asked for). The history only
grows, so every request of a task repeats the previous one up to its tail, which is what keeps
llama.cpp's KV cache warm. Everything here is a pure function of the task's events and the
profile, so replay can rebuild any request and compare it with what was recorded (the task's history
is folded by `Transcript.apply`, event by event, as part of the task's view).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from runtime.agent import compaction, excerpt, goal as goal_text, location
from runtime.agent.blocks import Block, join, neutralize, step_calls
from runtime.agent.goal import message_turn
from runtime.errors import ContextOverflow
from runtime.inference.model import Message
from runtime.skills.review import instruction_flags
from store.events import (
    AnswerGiven,
    ArtifactWritten,
    CompactionFailed,
    ContentMatched,
    ContextCompacted,
    ContextManifest,
    ContextTrimmed,
    EvidenceRetrieved,
    FileChanged,
    LeftOut,
    ManifestItem,
    ModelCalled,
    NoteTaken,
    NotificationsAdmitted,
    Recorded,
    SkillActivated,
    SkillActivationFailed,
    TaskSubmitted,
    TestsRan,
    TokenBuckets,
    ToolCallExecuted,
    ToolCallProposed,
    ToolCallStarted,
    UserSaid,
    WorkspaceSurveyed,
)
from store.state import TaskSummary

# The id an example is shown under, before its document's cite: `example:examples/escalate@v1`.
EXAMPLE_PREFIX = "example:"
# Tokens the chat template spends around the reply (the assistant header llama.cpp adds at the end).
PROTOCOL_OVERHEAD = 16
# Blocks a request ends with, which the next request replaces rather than repeats.
TAIL_LABELS = frozenset({"decision", "rejected", "pinned", "changes"})
# The task's changes are repeated beside the decision at most this long: the latest lines are kept.
CHANGES_LINES = 40
# A model-written argument longer than this is shown shortened in the step line: the file a
# write_file call wrote is in the workspace, and repeating it in every later request costs its length.
STEP_ARGUMENT_CHARS = 160


@dataclass
class Transcript:
    """The task's history as the model is shown it, rebuilt from its events.

    One ordered list of blocks: the request (and what was pasted into it), trusted facts, then, as
    they happened, evidence, notifications, skills, and each step the task took with its result. The
    model's own replies are not shown back to it: a small model that sees its last reply copies it
    word for word at the next step (measured on the default model: the same read_file, reason and
    all, in every failed workspace run). Each step is shown instead as the code carried it out.
    """

    entries: list[Block] = field(default_factory=list)
    evidence_ids: list[str] = field(default_factory=list)
    # What each decision's retrieval considered and left out, by call index: the manifest of that
    # decision's requests lists it beside what the context policy and the skill budget left out.
    evidence_left_out: dict[int, tuple[LeftOut, ...]] = field(default_factory=dict)
    read_paths: list[str] = field(default_factory=list)
    changed_paths: list[str] = field(default_factory=list)
    # The ids of the data blocks the model has been shown, in order: what a final answer may cite.
    citable: list[str] = field(default_factory=list)
    calls: int = 0
    last_manifest: ContextManifest | None = None
    last_result: Block | None = None
    # The latest result of a call that only reads: what evidence is retrieved for. An action's result
    # describes what it did (a key rotated: "active"), and retrieved for, it drew the rate-limit section
    # ("the key itself is fine") into a revoked-key task, which the default model then gave as its answer.
    last_read: Block | None = None
    # The decision `last_read` is the result of: a later decision with no newer read searches again for
    # what that one searched for (see agent.retrieval).
    read_after: int = 0
    _reads: set[str] = field(default_factory=set)
    paths: KnownPaths = field(default_factory=lambda: KnownPaths())
    # Each result block's label -> the event it shows: a policy that elides one says how to see it again.
    results: dict[str, ToolCallExecuted] = field(default_factory=dict)
    # The cut the task's requests make of this history, if the default policy has had to make one.
    trimmed: ContextTrimmed | None = None
    # The user's messages so far (the goal is the first), the words of the latest, and the calls made
    # before it: each message is a request of its own, with the task's step budget for it.
    turns: int = 0
    request: str = ""
    turn_start: int = 0
    # Each step's and result's seq in the log; the steps a summary replaces (policy `compact`) and the
    # summary the latest compaction wrote, as the requests after it show it.
    seqs: dict[str, int] = field(default_factory=dict)
    compacted: set[str] = field(default_factory=set)
    compaction: ContextCompacted | None = None
    summary: Block | None = None
    compaction_failed_at: int | None = None
    test_status: str | None = None
    # Each user message as (turn, its first block's seq, its blocks), and with policy `notes` the notes
    # kept of them as (turn, note) and the turns the note-taker has read, note or not.
    messages: list[tuple[int, int, tuple[Block, ...]]] = field(default_factory=list)
    notes: list[tuple[int, str]] = field(default_factory=list)
    noted: set[int] = field(default_factory=set)
    # What each call since the user's latest message changed, as its result showed it: (call id, diff).
    diffs: list[tuple[str, str]] = field(default_factory=list)
    # The files whose lines best matched the goal's words (ContentMatched), in the order shown.
    matched: tuple[str, ...] = ()

    def apply(self, rec: Recorded) -> None:
        """Take one more of the task's events into the history."""
        e = rec.event
        if isinstance(e, TaskSubmitted):
            self._said(e.goal, rec.seq)
            if e.context:
                self.entries.append(facts_block(e.context))
        elif isinstance(e, UserSaid):
            self._said(e.text, rec.seq)
        elif isinstance(e, NoteTaken):
            turn = message_turn(e.message)
            self.noted.add(turn)
            if e.note:
                self.notes.append((turn, e.note))
        elif isinstance(e, AnswerGiven):
            # Shown once the user says more, as a chat shows the last reply: what the follow-up is about.
            self.entries.append(Block(
                f"answer:{self.turns}", "instruction", "agentd", "trusted", f"You answered: {neutralize(e.answer)}"
            ))
        elif isinstance(e, EvidenceRetrieved):
            self.entries += [evidence_block(item) for item in e.items]
            self.evidence_ids += [item.cite for item in e.items]
            self.evidence_left_out[e.call_index] = (*self.evidence_left_out.get(e.call_index, ()), *e.left_out)
            # An example shows how to decide, not what is so: an answer may not cite it as a source.
            self.citable += [item.cite for item in e.items if not item.cite.startswith(EXAMPLE_PREFIX)]
        elif isinstance(e, NotificationsAdmitted):
            self.entries.append(notifications_block(e))
            if any(i.source == "file_watcher" for i in e.items):
                self.paths.read.clear()  # a file the task read has changed: it may read it again
        elif isinstance(e, SkillActivated):
            self.entries.append(skill_block(e))
        elif isinstance(e, SkillActivationFailed):
            self.entries.append(failure_block(e))
        elif isinstance(e, ContextTrimmed):
            self.trimmed = e
        elif isinstance(e, ContextCompacted):
            calls = step_calls(self.entries)
            self.compacted |= set(calls[: calls.index(e.through_call) + 1])
            self.compaction = e
            self.summary = summary_block(e, self.read_paths, self.changed_paths, self.test_status)
            if "summary" not in self.citable:
                self.citable.append("summary")
        elif isinstance(e, CompactionFailed):
            self.compaction_failed_at = e.call_index
        elif isinstance(e, TestsRan):
            self.test_status = e.status
        elif isinstance(e, ModelCalled):
            self.calls = max(self.calls, e.call_index)
            self.last_manifest = e.manifest or self.last_manifest
        elif isinstance(e, ToolCallProposed):
            self.entries.append(step_block(e))
            self.seqs[f"step:{e.call_id}"] = rec.seq
        elif isinstance(e, WorkspaceSurveyed):
            # First, before the request: measured on the default model, a listing between the request
            # and the decision drew its first call to whichever file the listing made salient.
            self.entries.insert(0, survey_block(e))
            self.citable.append("workspace")
            self.paths.surveyed(e)
        elif isinstance(e, ContentMatched):
            # After the request, next to the decision, where the survey is not: what the lines name is
            # what the first call should go to.
            self.entries.append(matches_block(e))
            self.citable.append("matches")
            self.matched = tuple(dict.fromkeys(m.path for m in e.matches))
        elif isinstance(e, (FileChanged, ArtifactWritten)):
            # Changed by the task: the content it holds is what it wrote, not what it read.
            if isinstance(e, FileChanged) and e.after_sha256 is None:
                self.paths.files.discard(e.path)
            else:
                self.paths.files.add(e.path)
            self.paths.read.discard(e.path)
            self.changed_paths.append(e.path)
        elif isinstance(e, ToolCallStarted):
            if "external" in e.effects:
                self.paths.complete = False
            if set(e.effects) <= {"read"}:
                self._reads.add(e.call_id)
        elif isinstance(e, ToolCallExecuted):
            self.paths.executed(e)
            block = observation_block(e, self.request)
            self.entries.append(block)
            self.results[block.label] = e
            self.seqs[block.label] = rec.seq
            self.last_result = block
            if e.call_id in self._reads:
                self.last_read = block
                self.read_after = self.calls
            self.citable.append(block.label)
            if isinstance(e.observation.get("diff"), str) and e.observation["diff"]:
                self.diffs.append((e.call_id, e.observation["diff"]))
            path = e.observation.get("path")
            if e.status == "ok" and isinstance(path, str) and e.tool == "read_file":
                self.read_paths.append(path)
                self.citable.append(path)

    def _said(self, text: str, seq: int) -> None:
        self.turns += 1
        request = goal_text.blocks(text, turn=self.turns)
        self.messages.append((self.turns, seq, tuple(request)))
        self.entries += request
        self.citable += [b.label for b in request if b.trust == "untrusted"]
        self.request = request[0].text
        self.turn_start = self.calls
        self.diffs = []

    @property
    def turn_calls(self) -> int:
        """The model calls made for the latest user message."""
        return self.calls - self.turn_start


@dataclass
class KnownPaths:
    """The workspace's paths as the task has seen them (its survey, folders listed, files written),
    and the files whose content it holds unchanged since it read them."""

    files: set[str] = field(default_factory=set)
    folders: set[str] = field(default_factory=lambda: {"."})
    # Whether `files` and `folders` are all there is: a survey that fit its limit. Otherwise a path
    # the task has not seen may still exist, and the grammar leaves paths free.
    complete: bool = False
    read: set[str] = field(default_factory=set)
    listed: set[str] = field(default_factory=set)

    def surveyed(self, e: WorkspaceSurveyed) -> None:
        for entry in e.entries:
            (self.folders.add(entry[:-1]) if entry.endswith("/") else self.files.add(entry))
        self.complete = e.complete
        if e.complete:
            # A survey that fit shows every folder's entries, counted: listing one would repeat it.
            # Offered, the default model listed folder after folder instead of reading the file it was
            # asked about.
            self.listed |= self.folders

    def executed(self, e: ToolCallExecuted) -> None:
        path = e.observation.get("path")
        if e.status != "ok" or not isinstance(path, str):
            return
        if e.tool == "read_file":
            self.read.add(path)
        elif e.tool == "list_files":
            self.listed.add(path)
            for entry in e.observation.get("entries") or ():
                if isinstance(entry, dict) and isinstance(entry.get("path"), str):
                    (self.folders if entry.get("kind") == "dir" else self.files).add(entry["path"])



def survey_block(e: WorkspaceSurveyed) -> Block:
    """The workspace's layout: names in it are data (a file may be named anything)."""
    more = "" if e.complete else "\n(more files are not listed here; list_files shows a folder)"
    # Sorted as paths, so a folder's files follow it; the survey itself is breadth first only so that
    # a listing cut at its limit still shows the top levels. A complete survey counts each folder's
    # files, as the listing of that folder would: "how many files in docs?" is then read, not counted.
    entries = sorted(e.entries)
    if e.complete:
        entries = [f"{p} ({_files_in(p, e.entries)})" if p.endswith("/") else p for p in entries]
    return Block("workspace", "evidence", "workspace", "untrusted", "\n".join(entries) + more)


def matches_block(e: ContentMatched) -> Block:
    """The workspace's lines that share the most words with the request: data, as any file's text is."""
    head = (f"The lines of the workspace's {e.files} files with most of the request's words "
            f"({', '.join(e.words)}), best first; matched by words, not by meaning:")
    lines = [f"{m.path}:{m.line}: {m.text}" for m in e.matches]
    return Block("matches", "evidence", "workspace", "untrusted", "\n".join([head, *lines]))


def _files_in(folder: str, entries: Sequence[str]) -> str:
    n = sum(1 for p in entries if p.startswith(folder) and not p.endswith("/") and "/" not in p[len(folder):])
    return f"{n} file" if n == 1 else f"{n} files"


def facts_block(facts: Mapping[str, str]) -> Block:
    """Trusted facts about the caller (`task submit --context`), shown once after the request."""
    return Block("facts", "task_state", "store", "trusted", "\n".join(f"{k}: {v}" for k, v in facts.items()))


def step_block(e: ToolCallProposed) -> Block:
    """A step as code carried it out: the tool and its arguments, never the model's reply or reason."""
    shown = {k: _shorten(v) for k, v in e.arguments.items()}
    # Arguments are the model's text and may carry a file's words: they cannot open a tag here.
    arguments = json.dumps(shown, ensure_ascii=False).replace("<", "\\u003c").replace(">", "\\u003e")
    step = e.call_id.lstrip("c")
    return Block(
        f"step:{e.call_id}", "instruction", "agentd", "trusted",
        f"Step {step}: you called {e.tool} with {arguments}; its result is result:{e.call_id}.",
    )


def _shorten(value):
    if isinstance(value, str) and len(value) > STEP_ARGUMENT_CHARS:
        return f"{value[:STEP_ARGUMENT_CHARS]}... ({len(value)} characters)"
    return value


def tail_blocks(
    transcript: Transcript,
    summary: TaskSummary | None,
    call_index: int,
    attempt: int = 1,
    error: str = "",
) -> list[Block]:
    """What a request ends with: why the last reply was refused (on a retry), then the decision asked for.

    Steps are counted from the user's latest message: each message is a request with its own budget.
    """
    blocks: list[Block] = []
    if attempt > 1:
        blocks.append(rejection_block(error or "refused", attempt))
    if transcript.diffs:
        blocks.append(changes_block(transcript.diffs))
    text = decision_text(
        summary, call_index - transcript.turn_start, transcript.request or None, attempt, trail=trail_text(transcript)
    )
    blocks.append(Block("decision", "instruction", "agentd", "trusted", text))
    return blocks


def changes_block(diffs: Sequence[tuple[str, str]]) -> Block:
    """Everything the task changed since the user's latest message, beside the decision: the answer is
    then written against what was done, not what was meant (seen on the default model: "todo.txt has
    been updated" after an edit that replaced an item instead of adding one)."""
    lines = ["What this task has changed so far (lines removed start with -, lines added with +):"]
    for call_id, text in diffs:
        lines += [f"Step {call_id.lstrip('c')}:", *text.splitlines()]
    if len(lines) > CHANGES_LINES + 1:
        lines = [lines[0], f"(the first {len(lines) - CHANGES_LINES - 1} lines are left out)", *lines[-CHANGES_LINES:]]
    return Block("changes", "observation", "agentd", "untrusted", "\n".join(lines))


def trail_text(t: Transcript) -> str:
    """The task's artifact trail so far, from the log: which files it read and which it changed.

    Seen on the default model: a task whose edit had succeeded made the same edit again, then wrote
    the file over, for want of knowing that the change was made. Told here, beside the decision.
    """
    parts = []
    if t.read_paths:
        parts.append(f"Files read so far: {paths_text(t.read_paths)}.")
    if t.changed_paths:
        parts.append(f"Files changed so far: {paths_text(t.changed_paths)}.")
    return " ".join(parts)


# A trail names at most this many files, the latest: the rest are counted. Measured with the policy
# bench, a trail naming every file of a 200-step session grew each request by ~2,000 tokens and
# forced a cut or a compaction every few steps.
TRAIL_NAMES = 20


def paths_text(paths: Sequence[str]) -> str:
    """Distinct paths in the order first seen, the latest TRAIL_NAMES of them named."""
    unique = list(dict.fromkeys(paths))
    if len(unique) <= TRAIL_NAMES:
        return ", ".join(unique) or "none"
    earlier = len(unique) - TRAIL_NAMES
    return f"{earlier} earlier (agentd task show lists them), then " + ", ".join(unique[-TRAIL_NAMES:])


def decision_text(
    s: TaskSummary | None,
    call_index: int,
    request: str | None = None,
    attempt: int = 1,
    trail: str = "",
) -> str:
    # The request is said again next to the newest results: a small model otherwise loses the question
    # behind a listing or a long tool output and repeats its last call (seed 000: keep the current task
    # and decision close to the evidence they refer to).
    state = f"Step {call_index} of at most {s.max_steps}." if s is not None else f"Step {call_index}."
    if s is not None and s.test_status:
        state += f" Tests: {s.test_status}."
    if trail:
        state += f" {trail}"
    for_file = request is not None and location.asks_for_file(request)
    request = f"\nThe request: {request}" if request is not None else ""
    if (s is not None and call_index >= s.max_steps) or attempt >= LAST_ATTEMPT:
        return state + request + "\n" + (_ASK_LAST_FILE if for_file else _ASK_LAST)
    return state + request + "\n" + (_ASK_FILE if for_file else _ASK_NEXT)


# The answer asked for as a sentence: asked for "with the ids of the <data> blocks you used", the
# default model answered with an id, a path or a file's content ("result:c1", "pyproject.toml"),
# and its thought copied the instruction. The sources are the grammar's to constrain.
_ASK_NEXT = (
    "If the results above answer the request, give the final answer: one full sentence that answers it. "
    "If not, call one tool."
)
_ASK_LAST = "Give the final answer now, from the results above."
# Where the request asks which file holds something, the answer is the file, and it can be given as soon
# as a file shown says it: asked "Where is it written that backups go to Harbour Backup?", the default
# model read the right file first, thought "The results show that backups go to Harbour Backup", and
# read six more files before it answered with one of those (most such cases of dev seed 16).
_ASK_FILE = (
    "If a file above says it, give the final answer: one full sentence that names that file's path. "
    "If not, call one tool."
)
_ASK_LAST_FILE = "Give the final answer now: the path of the file above that says it."
# How a refusal is put to the model; echoes_instructions looks for it in answers.
_REFUSED = " was not carried out: "


def echoes_instructions(text: str, rejections: Sequence[str] = ()) -> bool:
    """Whether a reply repeats what agentd told the model instead of answering: the decision asked for,
    or why one of its replies was refused. Seen on the default model, as whole answers: "The request: ...
    If the results above answer the request, give the final answer: ...", "The user's request was not
    carried out: rotate_api_key was already called with exactly these arguments (call c2)", and, steps
    after that refusal, "...was already called with exactly these arguments (call c2); its result is above."."""
    said = [ask.split(",")[0].split(":")[0] for ask in (_ASK_NEXT, _ASK_LAST, _ASK_FILE, _ASK_LAST_FILE)]
    said.append(_REFUSED.strip())
    # A refusal's reason past its opening words (the tool's name, which an answer may well use): long
    # enough not to be a phrase an answer may share by chance.
    for rejection in rejections:
        body = rejection.split(" ", 1)[-1]
        if len(body) >= 30:
            said.append(body[:30])
    return any(phrase in text for phrase in said)


def summary_block(e: ContextCompacted, read: Sequence[str], changed: Sequence[str], tests: str | None) -> Block:
    """The summary as the requests after it show it: the model's sections, then the artifact trail and
    test status from the log as they stood when it was written. Model-written from data: fenced as data."""
    lines = [f"Summary of the steps through {e.through_call} (they are in the log, events {e.first_seq}-{e.last_seq}):"]
    lines += [f"{title}: {e.sections.get(name, 'none')}" for name, title in compaction.SECTIONS.items()]
    lines.append(f"Files read: {paths_text(read)}.")
    lines.append(f"Files changed: {paths_text(changed)}.")
    lines.append(f"Test status: {tests or 'no tests run'}.")
    return Block("summary", "memory", "compaction", "untrusted", "\n".join(lines), e.summary_sha256[:12])


def skill_block(e: SkillActivated) -> Block:
    """A skill's instructions, in the turn after it was activated, versioned by its content hash."""
    return Block(f"skill:{e.name}", "skill", f"skill:{e.name}", "trusted", e.body, e.content_hash[:12])


def failure_block(e: SkillActivationFailed) -> Block:
    return Block(
        "skill_error", "skill", f"skill:{e.name}", "trusted",
        f"The skill {e.name} could not be loaded ({e.error}); go on without it.",
    )


def evidence_block(item) -> Block:
    # Shown under its cite, the id the runbook and skills tell the model to cite; what reads like
    # instructions in it is named in the manifest, as an MCP result's is.
    return Block(item.cite, "evidence", item.source, "untrusted", item.text, item.version,
                 flags=tuple(instruction_flags(item.text)), utility=item.utility)


NOTIFICATION_LINES = 20


def notifications_block(e: NotificationsAdmitted) -> Block:
    """The drained notifications as one block at the tail: harness facts, in enqueue order.

    At most NOTIFICATION_LINES of them are spelled out: a burst (a checkout touching every file the
    task read) must not crowd out the task itself. The rest are admitted all the same, and counted.
    """
    lines = [f"- [{i.source}/{i.kind}] {i.text}" for i in e.items[:NOTIFICATION_LINES]]
    if len(e.items) > NOTIFICATION_LINES:
        lines.append(
            f"- and {len(e.items) - NOTIFICATION_LINES} more; `agentd notifications list --task` shows them all"
        )
    ids = ",".join(i.notification_id for i in e.items)
    return Block("notifications", "notification", f"queue:{ids}", "trusted", neutralize("\n".join(lines)))


def observation_block(e: ToolCallExecuted, request: str = "") -> Block:
    return Block(
        f"result:{e.call_id}", "observation", f"tool:{e.tool}", "untrusted", observation_text(e, request),
        flags=flags_of(e),
    )


# Each flag as the manifest keeps it: the reason and the phrase, not a paragraph of the result.
FLAG_CHARS = 160


def flags_of(e: ToolCallExecuted) -> tuple[str, ...]:
    """The instruction-like phrases a tool's check found in its result (an MCP tool's `flagged`)."""
    found = e.observation.get("flagged")
    if not isinstance(found, list):
        return ()
    return tuple(str(f)[:FLAG_CHARS] for f in found if f)


# Kept in the log and the artifact index, left out of what the model reads: a hash is 64 characters
# of noise to it, and the tool's name is in the step line above the result.
_UNSHOWN = frozenset({"tool", "status", "sha256"})


def observation_text(e: ToolCallExecuted, request: str = "") -> str:
    """A result as lines a small model reads easily: `key: value`, a list of records one per line,
    and multi-line text (a file's content, a command's output) last and as it is, not JSON-escaped
    (measured: the default model misread escaped content, and counted "\\n" as lines). Where
    `request`, the message the call was made for, asks a question, a file's content is followed by
    the lines of it the question mentions (see agent.excerpt)."""
    lines = [f"status: {e.status}"]
    texts: list[tuple[str, str]] = []
    for key in sorted(e.observation):
        value = e.observation[key]
        if key in _UNSHOWN or value is None:
            continue
        if isinstance(value, str) and "\n" in value:
            texts.append((key, value))
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            lines.append(f"{key}:")
            lines += [
                "- " + ", ".join(f"{k}: {_scalar(v)}" for k, v in item.items() if v is not None) for item in value
            ]
        else:
            lines.append(f"{key}: {_scalar(value)}")
    for key, value in texts:
        lines += [f"{key}:", value.rstrip("\n")]
    content, path = e.observation.get("content"), e.observation.get("path")
    asked = goal_text.own_words(request)
    if excerpt.is_question(asked) and isinstance(content, str) and isinstance(path, str):
        found = excerpt.lines(asked, path, content)
        if found is not None:
            lines.append(found.text())
    return "\n".join(lines)


def _scalar(value) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


def rejection_block(error: str, attempt: int) -> Block:
    """Why the last reply was refused; the refused reply itself is not shown, lest it be copied again."""
    then = "" if attempt >= LAST_ATTEMPT else " Choose a different action."
    return Block("rejected", "instruction", "agentd", "trusted", f"Your last reply{_REFUSED}{error}.{then}")


# A refused proposal is retried with a narrower choice, down to only answering or escalating on the
# last try, before the decision (and the task) fails.
LAST_ATTEMPT = 3


@dataclass(frozen=True)
class Request:
    """One assembled request: the messages, the exact prompt text, and the manifest of what is in it."""

    messages: tuple[Message, ...]
    prompt: str
    manifest: ContextManifest
    blocks: tuple[Block, ...]
    # A cut of the history this request makes first, to record before it is sent (see agent.policy).
    trimmed: ContextTrimmed | None = None


def budget_of(window: int, max_output: int) -> int:
    return window - max_output - PROTOCOL_OVERHEAD


def layout(prefix: Sequence[Block], history: Sequence[Block], tail: Sequence[Block]) -> tuple[Message, Message]:
    """The two messages of a request: the stable prefix, then the history and this decision's tail."""
    return Message("system", join(list(prefix))), Message("user", join([*history, *tail]))


def assemble(
    *,
    prefix: Sequence[Block],
    history: Sequence[Block],
    step: int,
    tail: Sequence[Block],
    render: Callable[[Sequence[Message]], str],
    count: Callable[[str], int],
    window: int,
    max_output: int,
    decision: str,
    schema: dict,
    prompt_ref: Callable[[str], str],
    left_out: Sequence[LeftOut] = (),
) -> Request:
    """Lay out the prefix (the system message), then the history the context policy chose and this
    decision's tail (one user message that only grows at its end but for the tail), measure it, and
    refuse rather than truncate."""
    body = [*history, *tail]
    messages = layout(prefix, history, tail)
    prompt = render(messages)
    total = count(prompt)
    budget = budget_of(window, max_output)
    if total > budget:
        raise ContextOverflow(
            f"the request for step {step} needs {total} tokens but the budget is {budget} "
            f"(window {window} - output {max_output} - overhead {PROTOCOL_OVERHEAD}); "
            "instructions and task state are never cut, so the task stops here"
        )
    blocks = (*prefix, *body)
    prefix_text = render(messages[:1])
    manifest = ContextManifest(
        decision=decision,
        items=tuple(_item(b, count) for b in blocks),
        total_tokens=total,
        prefix_tokens=count(prefix_text),
        prefix_sha256=hashlib.sha256(prefix_text.encode()).hexdigest(),
        buckets=buckets(messages, prefix, body, render, count, total),
        window=window,
        max_output=max_output,
        overhead=PROTOCOL_OVERHEAD,
        budget=budget,
        left_out=tuple(left_out),
        prompt_ref=prompt_ref(prompt),
        schema_sha256=hashlib.sha256(json.dumps(schema, sort_keys=True).encode()).hexdigest(),
    )
    return Request(messages, prompt, manifest, blocks)


def _item(b: Block, count: Callable[[str], int]) -> ManifestItem:
    return ManifestItem(
        block=b.label, kind=b.kind, source=b.source, trust=b.trust, version=b.version, sha256=b.sha256,
        tokens=count(b.render()), flags=b.flags, utility=b.utility,
    )


def buckets(
    messages: Sequence[Message],
    prefix: Sequence[Block],
    body: Sequence[Block],
    render: Callable[[Sequence[Message]], str],
    count: Callable[[str], int],
    total: int,
) -> TokenBuckets:
    """Seed 003's four counts and three subtractions, with the model's own template and tokenizer."""
    without_tools = join([b for b in prefix if b.kind != "tool"])
    system_with_tools = count(render(messages[:1]))
    system_only = count(render([Message("system", without_tools)]))
    no_results = count(render([messages[0], Message("user", join([b for b in body if b.kind != "observation"]))]))
    tool_results = total - no_results
    return TokenBuckets(
        system=system_only,
        tool_definitions=system_with_tools - system_only,
        tool_results=tool_results,
        conversation=total - system_with_tools - tool_results,
        total=total,
    )


def prefix_break(previous: ContextManifest | None, current: ContextManifest) -> str | None:
    """The first block of the previous request that this one does not repeat in the same place, and why:
    `BLOCK: REASON`, where the reason is the policy's for leaving it out or shortening it, or what
    took its place.

    The previous request's tail (its decision, a refusal, pinned notes) is not history: each request has its own.
    """
    if previous is None:
        return None
    items = list(previous.items)
    while items and items[-1].block in TAIL_LABELS:
        items.pop()
    # A request shorter or longer than the previous one is the case below the loop.
    for old, new in zip(items, current.items, strict=False):
        if (old.block, old.sha256) != (new.block, new.sha256):
            return f"{old.block}: {_why_gone(old.block, new.block, current)}"
    if len(current.items) < len(items):
        gone = items[len(current.items)].block
        return f"{gone}: {_why_gone(gone, None, current)}"
    return None


def _why_gone(block: str, instead: str | None, current: ContextManifest) -> str:
    left = next((x for x in current.left_out if x.source == block), None)
    if left is not None:
        return left.reason
    if instead == block:
        return "its content changed"
    return f"{instead} stands in its place" if instead is not None else "no longer shown"
