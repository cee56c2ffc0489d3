"""Page benchmark: how soon a click on Approve resumes its task, and what the pages cost over a long log.

    1. resume   N tasks (20; 5 with --quick) wait for approval under `agentd serve` on the scripted
                model endpoint (tests/helpers/model_server.py). Each is approved by POSTing the page's own
                form over HTTP, with the session cookie and CSRF value a browser would send; timed
                from the POST to the first ToolCallStarted after its ApprovalGranted, seen by polling
                the SQLite file read-only every 10 ms, and from the events' own recorded_at.
    2. load     logs of 1,000 and 10,000 events (tasks with realistic decisions, appended through the
                store with the runtime's event classes and its approval path), each served by
                `agentd serve`: GET of each page to its full body, median of 10, with body sizes; the
                two logs side by side as ratios.

It prints the figures and writes bench/results/page.json. Timings are reported, never asserted.
See bench/README.md ("Approvals page").

    python bench/page_bench.py               # 20 approvals, 10 GETs a page; about 35 s
    python bench/page_bench.py --quick       # 5 approvals, 5 GETs a page; about 15 s
    python bench/page_bench.py --sizes 1000,10000,50000
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import platform
import random
import secrets
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path
from typing import Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from notifications import queue
from provenance import git, save, version
from runtime.agent.loop import arguments_hash
from runtime.agent.profiles import WORKSPACE
from runtime.harness import approvals as deciding
from runtime.harness.tasks import submit_task
from store import NO_STREAM, EventStore
from store.events import (
    AnswerGiven,
    ApprovalRequested,
    ArtifactRead,
    ArtifactWritten,
    ContextManifest,
    Event,
    ManifestItem,
    ModelCalled,
    NotificationsAdmitted,
    ProposalAccepted,
    TaskPhase,
    TaskPhaseChanged,
    TokenBuckets,
    ToolCallExecuted,
    ToolCallProposed,
    ToolCallStarted,
)
from store.ids import new_task_id

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DEFAULT_JSON = HERE / "results" / "page.json"
POLL_S = 0.01
# Every request the scripted model gets proposes a shell command, which waits for a person: after its
# approval a task runs the command, asks again and is back waiting, so one approval is one resume.
SHELL_REPLY = {"action": "call_tool", "tool": "shell", "arguments": {"command": "echo resumed-{n}"}, "reason": "bench"}


# -- shared --------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[2:4]} exited with code {proc.returncode} before listening")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port} after {timeout} s")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def model_server(folder: Path, delay_s: float) -> Iterator[str]:
    """tests/helpers/model_server.py as the tests run it: real tokenizer, scripted replies after `delay_s`."""
    script = folder / "script.json"
    script.write_text(json.dumps({"delay_s": delay_s, "replies": [SHELL_REPLY]}))
    port = free_port()
    with (folder / "model-server.log").open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.helpers.model_server", str(port), str(script)],
            cwd=REPO, stdout=log, stderr=log,
        )
        try:
            wait_for_port(port, proc)
            yield f"http://127.0.0.1:{port}"
        finally:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def agentd_serve(data_dir: Path, ws: Path, model_url: str) -> Iterator[httpx.Client]:
    """`agentd serve` on `data_dir`, and an HTTP client that opened its login address (so holds the
    session cookie); SIGTERM at the end."""
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")},
        "AGENTD_DATA_DIR": str(data_dir), "AGENTD_WORKSPACE": str(ws), "AGENTD_N_CTX": "8192",
        # The endpoint tokenizes with the smoke model, so agentd takes its chat template from the same file.
        "AGENTD_MODEL_URL": model_url, "AGENTD_MODEL": "smollm2-135m",
    }
    with (data_dir.parent / f"serve-{data_dir.name}.log").open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "runtime.cli", "serve", "--port", str(port)],
            cwd=REPO, env=env, stdout=log, stderr=log,
        )
        try:
            wait_for_port(port, proc)
            token = (data_dir / "page-token").read_text().strip()
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
                login = client.get("/", params={"token": token})
                if login.status_code != 303 or not client.cookies:
                    raise RuntimeError(f"the login address answered {login.status_code} and no session cookie")
                yield client
        finally:
            stop(proc)


@contextlib.contextmanager
def read_only(db: Path) -> Iterator[sqlite3.Connection]:
    """The log as an outside reader sees it: every SELECT reads the latest commit, nothing is written."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, isolation_level=None)
    try:
        yield conn
    finally:
        conn.close()


def ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def percentile(values: list[float], p: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[p - 1] if len(values) > 1 else values[0]


def stamp(iso: str) -> datetime:
    return datetime.fromisoformat(iso)


def progress(message: str) -> None:
    """Progress goes to stderr, so stdout holds only the figures."""
    print(f"[{datetime.now().strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -- 1. click → task resumed ---------------------------------------------------------------------------


class DecisionForms(HTMLParser):
    """The decision forms of each approval article, as a browser would submit them: the form's action,
    its hidden fields and the clicked button's name and value."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: dict[str, dict[str, tuple[str, dict[str, str]]]] = {}
        self._article: str | None = None
        self._form: dict | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "article" and "approval" in a.get("class", "").split():
            self._article = a.get("id")
        elif tag == "form" and self._article:
            self._form = {"action": a.get("action", ""), "fields": {}, "button": None}
        elif self._form is not None and tag == "input" and a.get("type") == "hidden":
            self._form["fields"][a["name"]] = a.get("value", "")
        elif self._form is not None and tag == "button" and a.get("name"):
            self._form["button"] = (a["name"], a.get("value", ""))

    def handle_endtag(self, tag: str) -> None:
        if tag == "form" and self._form is not None:
            if self._form["button"] is not None:
                name, value = self._form["button"]
                fields = {**self._form["fields"], name: value}
                self.forms.setdefault(self._article, {})[value] = (self._form["action"], fields)
            self._form = None
        elif tag == "article":
            self._article = None


def submit_waiting_tasks(data_dir: Path, ws: Path, n: int) -> list[str]:
    """N tasks submitted as `agentd task submit --allow external` makes them (without N CLI start-ups)."""
    with EventStore(f"sqlite:///{data_dir / 'agentd.db'}") as store:
        ids = []
        for i in range(n):
            task_id = new_task_id()
            events = submit_task(f"Run the release check, part {i}", ws, allowed_effects=("read", "external"))
            store.append(task_id, events, expected_version=NO_STREAM, actor="bench")
            ids.append(task_id)
    return ids


def until(probe, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not happen within {timeout} s")
        time.sleep(POLL_S)


def resumed_after(conn: sqlite3.Connection, task_id: str, after_seq: int) -> dict | None:
    """The ApprovalGranted after `after_seq` and the task's first events after it, once it has started the tool."""
    rows = conn.execute(
        "SELECT seq, type, recorded_at, payload FROM events WHERE stream_id = ? AND seq > ? ORDER BY seq",
        (task_id, after_seq),
    ).fetchall()
    granted = running = None
    for _seq, type_, at, payload in rows:
        if type_ == "ApprovalGranted" and granted is None:
            granted = at
        elif granted and type_ == "TaskPhaseChanged" and json.loads(payload)["phase"] == "running":
            running = at
        elif granted and type_ == "ToolCallStarted":
            return {"granted_at": granted, "running_at": running, "started_at": at}
    return None


def resume_latency(folder: Path, model_url: str, n: int, seed: int) -> dict:
    rng = random.Random(seed)
    data_dir, ws = folder / "resume", folder / "ws"
    data_dir.mkdir()
    ws.mkdir(exist_ok=True)
    db = data_dir / "agentd.db"
    task_ids = submit_waiting_tasks(data_dir, ws, n)
    samples: list[dict] = []
    with agentd_serve(data_dir, ws, model_url) as client, read_only(db) as conn:
        pending_sql = "SELECT approval_id, task_id FROM approvals WHERE status = 'pending' ORDER BY requested_seq"
        pending = until(lambda: (rows := conn.execute(pending_sql).fetchall()) and len(rows) >= n and rows,
                        timeout=180, what=f"{n} tasks waiting for approval")
        page = client.get("/approvals")
        parser = DecisionForms()
        parser.feed(page.text)
        progress(f"resume: {len(pending)} approvals pending, {len(parser.forms)} on the page; approving one at a time")
        for approval_id, task_id in pending:
            action, fields = parser.forms[approval_id]["approve"]
            # A person clicks at no particular moment of the scheduler's polling cycle; without this pause
            # every click would land at the same point of it, right after the previous task settled.
            time.sleep(rng.uniform(0, 1))
            (before,) = conn.execute("SELECT max(seq) FROM events WHERE stream_id = ?", (task_id,)).fetchone()
            clicked = time.perf_counter()
            posted = client.post(action, data=fields)
            answered = time.perf_counter()
            times = until(
                lambda task_id=task_id, before=before: resumed_after(conn, task_id, before),
                timeout=30, what=f"{task_id} resuming",
            )
            seen = time.perf_counter()
            # What the browser does next: follow the redirect to the page without the approval.
            redirect_s = None
            if posted.status_code == 303:
                t = time.perf_counter()
                client.get(posted.headers["location"]).raise_for_status()
                redirect_s = time.perf_counter() - t
            granted = stamp(times["granted_at"])
            samples.append({
                "approval_id": approval_id, "task_id": task_id, "status": posted.status_code,
                "post_ms": ms(answered - clicked), "resumed_ms": ms(seen - clicked),
                "granted_to_running_ms": ms((stamp(times["running_at"]) - granted).total_seconds())
                if times["running_at"] else None,
                "granted_to_started_ms": ms((stamp(times["started_at"]) - granted).total_seconds()),
                "redirect_get_ms": ms(redirect_s) if redirect_s is not None else None,
            })
            # Settle before the next one, so each resume is measured alone: the task ran the command,
            # asked the model again and waits for its next approval (or has ended).
            until(
                lambda task_id=task_id: settled(conn, task_id), timeout=60, what=f"{task_id} settling after its resume"
            )
    return {"tasks": len(task_ids), "samples": samples, **summary(samples)}


def settled(conn: sqlite3.Connection, task_id: str) -> bool:
    (waiting,) = conn.execute(
        "SELECT count(*) FROM approvals WHERE task_id = ? AND status = 'pending'", (task_id,)
    ).fetchone()
    (phase,) = conn.execute("SELECT phase FROM tasks WHERE task_id = ?", (task_id,)).fetchone()
    return waiting == 1 or phase in ("completed", "failed", "cancelled")


def summary(samples: list[dict]) -> dict:
    out = {}
    for key in ("post_ms", "resumed_ms", "granted_to_running_ms", "granted_to_started_ms", "redirect_get_ms"):
        values = [s[key] for s in samples if s[key] is not None]
        if values:
            out[key] = {"median": round(statistics.median(values), 2), "p95": round(percentile(values, 95), 2),
                        "min": min(values), "max": max(values)}
    return out


# -- 2. page load over a long log ----------------------------------------------------------------------

MODEL = "SmolLM2-135M-Instruct.Q4_1.gguf"
# The stable prefix of a workspace task as a real run records it: (block, kind, source, tokens).
PREFIX = (
    ("role", "instruction", "profile:workspace", 53), ("policy", "instruction", "profile:workspace", 98),
    ("tool_guidance", "instruction", "profile:workspace", 54), ("output", "instruction", "agentd", 124),
    ("tool:list_files", "tool", "tool:list_files", 185), ("tool:read_artifact", "tool", "tool:read_artifact", 241),
    ("tool:read_file", "tool", "tool:read_file", 283), ("tool:read_skill_file", "tool", "tool:read_skill_file", 342),
    ("tool:run_skill_script", "tool", "tool:run_skill_script", 415), ("tool:shell", "tool", "tool:shell", 199),
    ("tool:start_job", "tool", "tool:start_job", 188), ("skills", "skill", "skills", 289),
)
PREFIX_TOKENS = sum(t for *_, t in PREFIX)
FILES = ("src/app/parser.py", "src/app/dates.py", "tests/test_dates.py", "README.md", "CHANGELOG.md", "pyproject.toml")
COMMANDS = ("python -m pytest -q tests/test_dates.py", "git diff --stat", "ruff check src", "python -m build")
GOALS = (
    "Fix the failing date parsing in {f} and add a regression test",
    "Summarise what changed in {f} since the last release",
    "Find why the nightly job fails on {f} and propose a fix",
    "Update the changelog for the fixes in {f}",
)
PENDING_APPROVALS = 5
BIG_DECISIONS = 40  # the default max_steps: no task takes more decisions than this


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class Filler:
    """Writes tasks the way the agent loop records them: per decision the admitted notifications, the
    model call with its manifest, the accepted proposal, then the tool call; shell waits for approval,
    decided through `runtime.approvals.decide` as the page and the CLI do."""

    def __init__(self, store: EventStore, ws: Path, rng: random.Random) -> None:
        self.store, self.ws, self.rng = store, ws, rng
        self.policy_version = WORKSPACE.version

    def task(self, decisions: int, *, pending: bool = False) -> str:
        task_id = new_task_id()
        f = self.rng.choice(FILES)
        events = submit_task(self.rng.choice(GOALS).format(f=f), self.ws, allowed_effects=("read", "write", "external"))
        self.store.append(task_id, [*events, TaskPhaseChanged(phase=TaskPhase.RUNNING, reason="started")],
                          expected_version=NO_STREAM, actor="bench")
        observations: list[int] = []
        for k in range(1, decisions + 1):
            last = k == decisions
            if last and not pending:
                action = {"action": "final_answer", "answer": f"Done: {f} is fixed and tested; see the diff.",
                          "sources": [f"artifact:{f}"]}
            elif last:
                action = self.shell_action()
            else:
                action = self.rng.choices(
                    [self.read_action, self.list_action, self.write_action, self.shell_action], [45, 20, 15, 20]
                )[0]()
            head = [*self.admitted(task_id, k), self.model_called(k, action, observations),
                    ProposalAccepted(call_index=k, action=action)]
            if action["action"] == "final_answer":
                self.append(task_id, *head, AnswerGiven(answer=action["answer"], sources=tuple(action["sources"])),
                            TaskPhaseChanged(phase=TaskPhase.COMPLETED, reason="answered"))
                break
            observations.append(self.call_tool(task_id, k, action, head, leave_pending=last))
        return task_id

    def append(self, task_id: str, *events: Event) -> None:
        self.store.append(task_id, list(events), actor="agentd")

    def admitted(self, task_id: str, k: int) -> list[Event]:
        with self.store.reading() as conn:
            items = queue.drain(queue.pending(conn, task_id))
        return [NotificationsAdmitted(call_index=k, items=items)] if items else []

    def model_called(self, k: int, action: dict, observations: list[int]) -> ModelCalled:
        items = [ManifestItem(block=b, kind=kind, source=src, trust="trusted", version=sha(b)[:12], sha256=sha(b),
                              tokens=t) for b, kind, src, t in PREFIX]
        items.append(ManifestItem(block="goal", kind="task_state", source="user", trust="untrusted",
                                  sha256=sha(f"goal{k}"), tokens=24))
        items += [ManifestItem(block=f"observation:c{j}", kind="observation", source="tool", trust="untrusted",
                               sha256=sha(f"obs{j}{t}"), tokens=t) for j, t in enumerate(observations, start=1)]
        items += [ManifestItem(block="task_state", kind="task_state", source="store", trust="trusted",
                               sha256=sha(f"state{k}"), tokens=47),
                  ManifestItem(block="decision", kind="instruction", source="agentd", trust="trusted",
                               sha256=sha(f"decision{k}"), tokens=32)]
        output = json.dumps(action)
        total = sum(i.tokens for i in items) + 45 * (k - 1)  # earlier replies are in the transcript too
        conversation = total - PREFIX_TOKENS - sum(observations)
        manifest = ContextManifest(
            decision="next_step", items=tuple(items), total_tokens=total, prefix_tokens=PREFIX_TOKENS + 24,
            prefix_sha256=sha("prefix"),
            buckets=TokenBuckets(system=635, tool_definitions=PREFIX_TOKENS - 635, tool_results=sum(observations),
                                 conversation=conversation, total=total),
            window=8192, max_output=384, overhead=16, budget=7792,
            prompt_ref=f"artifact://sha256/{sha(f'prompt{k}{output}')}", schema_sha256=sha("schema"),
        )
        cached = PREFIX_TOKENS + (total - PREFIX_TOKENS) * 9 // 10 if k > 1 else 0
        return ModelCalled(
            call_index=k, model=MODEL, manifest=manifest, prompt_tokens=total, completion_tokens=len(output) // 3,
            cached_tokens=cached, evaluated_tokens=total - cached, ttft_s=round(0.05 + (total - cached) / 200, 3),
            generation_s=round(len(output) / 3 / 45, 3), output=output,
        )

    def read_action(self) -> dict:
        return {"action": "call_tool", "tool": "read_file", "arguments": {"path": self.rng.choice(FILES)},
                "reason": "Read it before changing anything."}

    def list_action(self) -> dict:
        folder = self.rng.choice(("src/app", "tests", "."))
        return {"action": "call_tool", "tool": "list_files", "arguments": {"path": folder},
                "reason": "See what is there."}

    def write_action(self) -> dict:
        path = self.rng.choice(FILES)
        content = f"# {path}\n" + "x = parse('2026-03-03')\n" * self.rng.randint(3, 30)
        return {"action": "call_tool", "tool": "write_file", "arguments": {"path": path, "content": content},
                "reason": "Apply the fix."}

    def shell_action(self) -> dict:
        return {"action": "call_tool", "tool": "shell", "arguments": {"command": self.rng.choice(COMMANDS)},
                "reason": "Check that the tests pass."}

    def call_tool(self, task_id: str, k: int, action: dict, head: list[Event], *, leave_pending: bool) -> int:
        """Records the call (and its approval); returns the tokens its observation takes in the next prompts."""
        tool, args, call_id = action["tool"], action["arguments"], f"c{k}"
        proposed = ToolCallProposed(call_id=call_id, tool=tool, arguments=args, reason=action["reason"])
        if tool != "shell":
            size = self.rng.randint(200, 6000)
            digest = sha(f"{task_id}{k}")
            path = args["path"]
            observation = {"tool": tool, "status": "ok", "path": path}
            trail: list[Event] = []
            if tool == "read_file":
                observation |= {"size": size, "sha256": digest, "lines": size // 40}
                trail = [ArtifactRead(path=path, sha256=digest, size=size)]
            elif tool == "write_file":
                size = len(args["content"])
                observation |= {"size": size, "sha256": digest, "created": False, "changed": True}
                trail = [ArtifactWritten(path=path, sha256=digest, size=size)]
            else:
                observation |= {"count": 7, "omitted": 0}
            self.append(task_id, *head, proposed,
                        ToolCallStarted(call_id=call_id, tool=tool, idempotent=tool != "write_file"),
                        ToolCallExecuted(call_id=call_id, tool=tool, status="ok", observation=observation,
                                         artifact_ref=f"artifact://sha256/{digest}" if tool == "read_file" else None,
                                         elapsed_s=round(self.rng.uniform(0.001, 0.02), 4)),
                        *trail)
            return self.rng.randint(30, 110)
        approval_id = f"ap-{secrets.token_hex(4)}"
        self.append(task_id, *head, proposed, ApprovalRequested(
            approval_id=approval_id, call_id=call_id, tool=tool, arguments_hash=arguments_hash(args),
            reason=action["reason"], expires_at=(datetime.now(UTC) + timedelta(days=1)).isoformat(),
            policy_version=self.policy_version,
        ), TaskPhaseChanged(phase=TaskPhase.AWAITING_APPROVAL, reason="shell needs approval"))
        if leave_pending:
            return 0
        grant = self.rng.random() < 0.8
        reason = "" if grant else "Not on the release branch; run it on a copy first."
        deciding.decide(self.store, approval_id, grant=grant, by="ops", reason=reason)
        if grant:
            out = "12 passed in 0.84s\n" * self.rng.randint(1, 4)
            self.append(task_id, TaskPhaseChanged(phase=TaskPhase.RUNNING, reason="approved by ops"),
                        ToolCallStarted(call_id=call_id, tool=tool, idempotent=False),
                        ToolCallExecuted(call_id=call_id, tool=tool, status="ok", elapsed_s=1.2, observation={
                            "tool": tool, "status": "ok", "exit_code": 0, "stdout": out, "stderr": "",
                            "stdout_bytes": len(out), "stderr_bytes": 0}))
        else:
            self.append(task_id, TaskPhaseChanged(phase=TaskPhase.RUNNING, reason="shell denied"),
                        ToolCallExecuted(call_id=call_id, tool=tool, status="denied",
                                         observation={"error": "denied", "message": reason}))
        return self.rng.randint(30, 70)


def fill(data_dir: Path, ws: Path, events: int, seed: int) -> dict:
    """A log of at least `events` events: one task of the most decisions a task may take, a few left
    waiting for approval, and the rest ordinary tasks of 2 to 12 decisions. Tasks are written one after
    another rather than interleaved as concurrent ones would be; the pages read by task, not by time."""
    rng = random.Random(seed)
    data_dir.mkdir(parents=True)
    # The fill is not measured: no fsync per commit.
    with EventStore(f"sqlite:///{data_dir / 'agentd.db'}", synchronous="off") as store:
        filler = Filler(store, ws, rng)
        big = filler.task(BIG_DECISIONS)
        waiting = [filler.task(rng.randint(2, 6), pending=True) for _ in range(PENDING_APPROVALS)]
        tasks = 1 + len(waiting)
        while store.last_seq() < events:
            filler.task(rng.randint(2, 12))
            tasks += 1
        with store.reading() as conn:
            by_type = dict(conn.exec_driver_sql("SELECT type, count(*) FROM events GROUP BY type").fetchall())
        big_events = store.stream_version(big)
        total = store.last_seq()
    return {"events": total, "tasks": tasks, "big_task": big, "big_task_events": big_events,
            "pending": len(waiting), "waiting_task": waiting[0], "by_type": by_type,
            "db_bytes": sum(p.stat().st_size for p in data_dir.glob("agentd.db*"))}


def page_paths(filled: dict) -> list[tuple[str, str]]:
    big = filled["big_task"]
    return [
        ("approvals", "/approvals"),
        ("tasks", "/tasks"),
        ("task (big)", f"/tasks/{big}"),
        ("events", "/events"),
        ("events of a task (big)", f"/events?task={big}"),
        ("call 1 manifest", f"/tasks/{big}/calls/1"),
    ]


def time_pages(client: httpx.Client, paths: list[tuple[str, str]], rounds: int) -> list[dict]:
    out = []
    for name, path in paths:
        client.get(path)  # warm: the first read of each table after start pays for the OS cache
        times, sizes, statuses = [], set(), set()
        for _ in range(rounds):
            t = time.perf_counter()
            r = client.get(path)
            body = r.content  # httpx reads the whole body before returning; this is the full page
            times.append(time.perf_counter() - t)
            sizes.add(len(body))
            statuses.add(r.status_code)
        out.append({"page": name, "path": path, "status": sorted(statuses), "bytes": max(sizes),
                    "median_ms": ms(statistics.median(times)), "min_ms": ms(min(times)), "max_ms": ms(max(times))})
    return out


def page_load(folder: Path, model_url: str, size: int, rounds: int, seed: int) -> dict:
    data_dir, ws = folder / f"log-{size}", folder / "ws"
    ws.mkdir(exist_ok=True)
    t = time.perf_counter()
    filled = fill(data_dir, ws, size, seed)
    progress(f"load: {filled['events']:,} events in {filled['tasks']} tasks written in {time.perf_counter() - t:.1f} s")
    with agentd_serve(data_dir, ws, model_url) as client:
        pages = time_pages(client, page_paths(filled), rounds)
    with read_only(data_dir / "agentd.db") as conn:
        (after,) = conn.execute("SELECT max(seq) FROM events").fetchone()
    # The daemon looks at the waiting tasks once when it starts; it should record nothing for them.
    return {**filled, "events_after_serving": after, "rounds": rounds, "pages": pages}


# -- the run -------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--approvals", type=int, default=20, help="tasks approved one by one (default 20)")
    ap.add_argument("--rounds", type=int, default=10, help="timed GETs of each page (default 10)")
    ap.add_argument("--sizes", default="1000,10000", help="events in the log, comma-separated (default 1000,10000)")
    ap.add_argument("--delay", type=float, default=0.02, help="the scripted model's delay per reply, s (default 0.02)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="5 approvals, 5 GETs a page")
    ap.add_argument("--json", default=str(DEFAULT_JSON))
    args = ap.parse_args(argv)
    args.sizes = [int(s) for s in args.sizes.split(",")]
    if args.quick:
        args.approvals, args.rounds = 5, 5
    return args


def render(results: dict) -> str:
    r = results["resume"]
    lines = [f"Approve (form POST) → task resumed, {len(r['samples'])} approvals, one at a time"]
    labels = {
        "post_ms": "POST answered (303)",
        "resumed_ms": "POST sent → ToolCallStarted seen",
        "granted_to_running_ms": "ApprovalGranted → running (recorded_at)",
        "granted_to_started_ms": "ApprovalGranted → ToolCallStarted (recorded_at)",
        "redirect_get_ms": "then GET of the redirect",
    }
    for key, label in labels.items():
        if key in r:
            s = r[key]
            lines.append(f"  {label:<50} median {s['median']:7.1f} ms   p95 {s['p95']:7.1f}   "
                         f"min {s['min']:7.1f}   max {s['max']:7.1f}")
    loads = results["load"]
    lines += ["", "Page load, GET to the full body (median of "
              f"{loads[0]['rounds']}; ms, and body bytes)"]
    head = f"  {'page':<24}" + "".join(f"{format(log['events'], ',') + ' events':>26}" for log in loads)
    if len(loads) > 1:
        head += f"{'time ratio':>12}{'size ratio':>12}"
    lines.append(head)
    for i, (name, _) in enumerate(page_paths(loads[0])):
        row = f"  {name:<24}"
        for log in loads:
            p = log["pages"][i]
            status = "" if p["status"] == [200] else f" ({p['status']})"
            row += f"{p['median_ms']:>10.1f} ms {p['bytes']:>10,} B{status}"
        if len(loads) > 1:
            a, b = loads[0]["pages"][i], loads[-1]["pages"][i]
            row += f"{b['median_ms'] / a['median_ms']:>11.1f}×{b['bytes'] / a['bytes']:>11.1f}×"
        lines.append(row)
    for log in loads:
        lines.append(f"  {log['events']:,} events: {log['tasks']} tasks, the big one {log['big_task_events']} events, "
                     f"{log['pending']} approvals pending, database {log['db_bytes'] / 1e6:.1f} MB; "
                     f"{log['events_after_serving'] - log['events']} events recorded while served")
    return "\n".join(lines)


def describe_run(args: argparse.Namespace) -> dict:
    return {
        "started_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "argv": sys.argv[1:], "approvals": args.approvals, "rounds": args.rounds, "sizes": args.sizes,
        "model_delay_s": args.delay, "seed": args.seed, "cpus": os.cpu_count(), "machine": platform.platform(),
        "python": platform.python_version(), "starlette": version("starlette"), "uvicorn": version("uvicorn"),
        "httpx": version("httpx"), "sqlalchemy": version("sqlalchemy"),
        "git_commit": git(["rev-parse", "HEAD"]),
        "runtime_uncommitted_changes": git(["status", "--porcelain", "--", ":/runtime"]),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    meta = describe_run(args)
    results: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        with model_server(folder, args.delay) as model_url:
            progress(f"resume: {args.approvals} tasks, scripted model at {model_url}")
            results["resume"] = resume_latency(folder, model_url, args.approvals, args.seed)
            results["load"] = []
            for size in args.sizes:
                progress(f"load: filling a log of {size:,} events")
                results["load"].append(page_load(folder, model_url, size, args.rounds, args.seed))
    print(render(results))
    save(args.json, meta, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
