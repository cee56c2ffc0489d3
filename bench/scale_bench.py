"""Scale-out benchmark: the log on PostgreSQL from several writers and processes, and several workers.

In one run on one machine, against the local PostgreSQL (AGENTD_BENCH_POSTGRES, by default the test
server postgresql+psycopg://postgres@127.0.0.1:5432/test), each part on a schema of its own, dropped after:

    appends    events appended per second, one event per append, by 1, 4 and 16 writer threads in each
               of 1 and 4 processes (each process its own EventStore) on PostgreSQL, and by 1, 4 and 16
               threads of 1 process on SQLite (WAL, synchronous=full); every case in a child process,
               time-boxed, the cases interleaved over --rounds so a slow spell of the machine falls on all
    tasks      tasks finished per minute by 1, 2 and 4 `agentd serve` workers, short tasks (a file read,
               then an answer) on the scripted model endpoint (tests/helpers/model_server.py)
    takeover   seconds from a kill -9 of the worker holding tasks until another worker holds their leases,
               and until it records the tasks' next event, beside lease_s
    reuse      the share of prompt tokens found already evaluated, for two tasks' growing prompts sent in
               turn (as two workers send them) to one `agentd model serve` on the smoke model, beside the
               same calls to an in-process model: what sharing the server costs in prefix reuse

It prints a table of figures and ratios and writes bench/results/scale.json. Timings are reported, never
asserted. See bench/README.md for what the figures mean.

    python bench/scale_bench.py --quick      # a few minutes
    python bench/scale_bench.py              # the fuller run
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from provenance import git, save, version

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SERVER = os.environ.get("AGENTD_BENCH_POSTGRES", "postgresql+psycopg://postgres@127.0.0.1:5432/test")

WRITERS = (1, 4, 16)
PROCESSES = (1, 4)
WORKERS = (1, 2, 4)
MODEL_DELAY_S = 0.05
"""The scripted model's reply time for the throughput tasks: fast, so the workers are what is measured."""
LONG_DELAY_S = 0.5
"""The scripted model's reply time for the long tasks of the takeover measurement."""
LONG_TICK_S = 0.3
"""How long each step's tool call of the long tasks takes."""

QUICK = {"seconds": 3.0, "rounds": 2, "tasks": 24, "kills": 3, "lease_s": 3.0}
FULL = {"seconds": 10.0, "rounds": 3, "tasks": 80, "kills": 6, "lease_s": 3.0}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="a run of a few minutes: " + _sizes(QUICK))
    p.add_argument("--seconds", type=float, help=f"seconds each append case runs per round ({FULL['seconds']:g})")
    p.add_argument("--rounds", type=int, help=f"interleaved rounds of the append cases ({FULL['rounds']})")
    p.add_argument("--tasks", type=int, help=f"tasks per throughput case ({FULL['tasks']})")
    p.add_argument("--kills", type=int, help=f"kill -9s in the takeover measurement ({FULL['kills']})")
    p.add_argument("--lease-s", type=float,
                   help=f"the workers' lease_s in the takeover measurement ({FULL['lease_s']:g})")
    p.add_argument("--skip", action="append", default=[], choices=("appends", "tasks", "takeover", "reuse"),
                   help="leave a part out (may be given more than once)")
    p.add_argument("--json", default=str(HERE / "results" / "scale.json"), help="where to write the results")
    p.add_argument("--child-append", nargs=3, metavar=("URL", "WRITERS", "SECONDS"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    for key, value in (QUICK if args.quick else FULL).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    return args


def _sizes(sizes: dict) -> str:
    return (f"{sizes['seconds']:g} s per append case and round, {sizes['rounds']} rounds, {sizes['tasks']} tasks "
            f"per worker count, {sizes['kills']} kills")


def progress(message: str) -> None:
    """Progress goes to stderr, so stdout holds only the table."""
    print(f"[{datetime.now().strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -- PostgreSQL schemas -------------------------------------------------------------------------------


@contextlib.contextmanager
def pg_schema() -> Iterator[str]:
    """A URL whose connections see only a new schema of the server, dropped afterwards."""
    from sqlalchemy import create_engine

    schema = f"bench_{uuid.uuid4().hex[:12]}"
    admin = create_engine(SERVER, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    try:
        yield f"{SERVER}?options=-csearch_path%3D{schema}"
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
        admin.dispose()


def pg_settings() -> dict:
    from sqlalchemy import create_engine

    engine = create_engine(SERVER)
    try:
        with engine.connect() as conn:
            return {name: conn.exec_driver_sql(f"SHOW {name}").scalar() for name in
                    ("server_version", "synchronous_commit", "fsync", "wal_sync_method", "commit_delay")}
    finally:
        engine.dispose()


# -- appends: one child process per store -------------------------------------------------------------


def child_append(url: str, writers: int, seconds: float) -> None:
    """One process of an append case: `writers` threads appending one event per call, each to a task of
    its own, through this process's one EventStore, from the start time the parent sends on stdin until
    `seconds` later. Prints one JSON line: the appends, the commits they took and when the last ended."""
    from agentd_cases import CommitCounter, start_task
    from store.eventstore import EventStore
    from workload import EventPool

    pool = EventPool()
    with EventStore(url, upgrade=False) as store:
        tasks = [start_task(store, w) for w in range(writers)]
        counts = [0] * writers
        ended = [0.0] * writers
        print("ready", flush=True)
        start = float(sys.stdin.readline())
        deadline = start + seconds

        def appender(w: int) -> None:
            events = pool.stream(offset=w * 37)
            time.sleep(max(0.0, start - time.time()))
            n = 0
            while time.time() < deadline:
                store.append(tasks[w], [next(events)])
                n += 1
            counts[w], ended[w] = n, time.time()

        threads = [threading.Thread(target=appender, args=(w,)) for w in range(writers)]
        with CommitCounter(store) as counter:
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    print(json.dumps({"appends": sum(counts), "commits": counter.commits, "ended": max(ended)}), flush=True)


def append_case(url: str, processes: int, writers: int, seconds: float) -> dict:
    """Run one case once: `processes` children of `writers` threads each, started together."""
    children = [
        subprocess.Popen([sys.executable, str(Path(__file__)), "--child-append", url, str(writers), str(seconds)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO)
        for _ in range(processes)
    ]
    try:
        for c in children:
            if c.stdout.readline().strip() != "ready":
                raise RuntimeError("an append child failed before it was ready")
        # Every child has its store open and its tasks started; all of them begin at one moment.
        start = time.time() + 0.2
        for c in children:
            c.stdin.write(f"{start}\n")
            c.stdin.flush()
        said = [json.loads(c.stdout.readline()) for c in children]
    finally:
        for c in children:
            c.wait(timeout=120)
    wall = max(s["ended"] for s in said) - start
    return {"appends": sum(s["appends"] for s in said), "commits": sum(s["commits"] for s in said), "seconds": wall}


def append_cases(pg_url: str, sqlite_url: str) -> list[tuple[str, str, int, int]]:
    """(key, url, processes, writers per process) of every append case."""
    cases = [(f"pg_{p}x{w}", pg_url, p, w) for p in PROCESSES for w in WRITERS]
    return cases + [(f"sqlite_1x{w}", sqlite_url, 1, w) for w in WRITERS]


def run_appends(args: argparse.Namespace) -> dict:
    from store.eventstore import EventStore

    with pg_schema() as pg_url, tempfile.TemporaryDirectory(prefix="agentd-bench-scale-") as folder:
        sqlite_url = f"sqlite:///{os.path.join(folder, 'agentd.db')}"
        for url in (pg_url, sqlite_url):
            EventStore(url).close()  # the schema, made once, before any child opens it
        cases = append_cases(pg_url, sqlite_url)
        totals = {key: {"appends": 0, "commits": 0, "seconds": 0.0, "rounds": []} for key, *_ in cases}
        for r in range(args.rounds):
            progress(f"appends: round {r + 1} of {args.rounds}, {len(cases)} cases of {args.seconds:g} s")
            k = r % len(cases)
            for key, url, processes, writers in cases[k:] + cases[:k]:
                once = append_case(url, processes, writers, args.seconds)
                total = totals[key]
                for name in ("appends", "commits", "seconds"):
                    total[name] += once[name]
                total["rounds"].append(round(once["appends"] / once["seconds"], 1))
        out = {}
        for key, _, processes, writers in cases:
            t = totals[key]
            out[key] = {**t, "processes": processes, "writers": writers, "per_second": t["appends"] / t["seconds"],
                        "commits_per_second": t["commits"] / t["seconds"],
                        "mean_batch": t["appends"] / t["commits"] if t["commits"] else None}
        return out


# -- workers: agentd serve on one schema --------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listens on port {port} after {timeout_s} s")


@contextlib.contextmanager
def model_server(folder: Path, replies: list[dict], delay_s: float) -> Iterator[str]:
    """The scripted completions endpoint, as a process of its own: the fast model of these measurements."""
    script = folder / f"script-{uuid.uuid4().hex[:6]}.json"
    script.write_text(json.dumps({"delay_s": delay_s, "replies": replies}))
    port = free_port()
    # Its stderr is left out: a killed worker's call in flight ends in a broken pipe there, by design.
    server = subprocess.Popen([sys.executable, "-m", "tests.helpers.model_server", str(port), str(script)], cwd=REPO,
                              stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.kill()
        server.wait()


class Workers:
    """`agentd serve` processes on one database and one data folder, as on one host."""

    def __init__(self, folder: Path, url: str, model_url: str, lease_s: float, tick_s: float = 0.0) -> None:
        self.folder = folder
        self.workspace = folder / "ws"
        self.workspace.mkdir(exist_ok=True)
        plugin = folder / "bench_plugin.py"
        plugin.write_text(PLUGIN)
        self.env = {
            **os.environ, "AGENTD_DATA_DIR": str(folder / "data"), "AGENTD_DATABASE_URL": url,
            "AGENTD_MODEL_URL": model_url, "AGENTD_MODEL": "smollm2-135m", "AGENTD_N_CTX": "8192",
            "AGENTD_WORKSPACE": str(self.workspace), "AGENTD_LEASE_S": str(lease_s), "PYTHONPATH": str(REPO),
            "AGENTD_PLUGINS": str(plugin), "BENCH_TICK_S": str(tick_s),
        }
        self.procs: list[subprocess.Popen] = []
        self.logs: list[Path] = []

    def start(self) -> subprocess.Popen:
        log = self.folder / f"worker-{len(self.procs)}.log"
        with log.open("w") as err:
            proc = subprocess.Popen([sys.executable, "-m", "runtime.cli", "serve", "--port", str(free_port())],
                                    env=self.env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=err)
        self.procs.append(proc)
        self.logs.append(log)
        return proc

    def living(self) -> list[subprocess.Popen]:
        return [p for p in self.procs if p.poll() is None]

    def wait_serving(self, store, count: int, timeout_s: float = 180) -> None:
        """Until `count` of the living processes have registered and beat recently."""
        pids = {p.pid for p in self.living()}
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            now, found, _ = store.workers.snapshot()
            serving = [w for w in found if w.pid in pids and w.stopped_at is None and now - w.heartbeat_at < 5]
            if len(serving) >= count:
                return
            for p, log in zip(self.procs, self.logs, strict=True):
                if p.poll() is not None and p.returncode not in (0, -signal.SIGKILL):
                    raise RuntimeError(f"a worker failed at start:\n{log.read_text()[-2000:]}")
            time.sleep(0.2)
        raise RuntimeError(f"fewer than {count} workers serving after {timeout_s} s")

    def stop(self) -> None:
        for p in self.living():
            p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def submit(store, workspace: Path, goal: str, policy: str = "auto", max_steps: int | None = None) -> str:
    """A task submitted as the CLI does, without a process of its own per task."""
    from runtime.harness.tasks import submit_task
    from store import NO_STREAM
    from store.ids import new_task_id

    task_id = new_task_id()
    events = submit_task(goal, workspace, profile="ticks", policy=policy, max_steps=max_steps)
    store.append(task_id, events, expected_version=NO_STREAM, actor="bench")
    return task_id


PLUGIN = '''
"""The benchmark's tool: a step that computes nothing and takes BENCH_TICK_S seconds, as long as wanted."""
import os
import time
from pydantic import BaseModel
from runtime.agent.profiles import WORKSPACE
from runtime.tools import Tool, ToolContract


class Args(BaseModel):
    model_config = {"extra": "forbid"}
    label: str


class Out(BaseModel):
    label: str


class Tick(Tool):
    contract = ToolContract(name="tick", description="Take one step of the work.", input_model=Args,
                            output_model=Out, effects=(), idempotent=True, scope="task", timeout_s=30)

    def run(self, ctx, args):
        time.sleep(float(os.environ.get("BENCH_TICK_S", "0")))
        return Out(label=args.label)


def register(tools, profiles):
    tools.register(Tick())
    profiles["ticks"] = WORKSPACE.model_copy(update={"name": "ticks", "tools": ("tick",)})
'''
"""A plugin tool rather than a file tool: the file tools' rules narrow a task to its answer once the
workspace is read, and the long tasks of the takeover must go on taking steps as long as they are let."""

TICK = {"action": "call_tool", "tool": "tick", "arguments": {"label": "step {n}"}, "reason": "the next step"}
ANSWER = {"action": "final_answer", "answer": "Done: every step is taken.", "sources": []}


def throughput_case(folder: Path, workers: int, tasks: int) -> dict:
    """`tasks` short tasks submitted at once to `workers` serving workers; the time until all have finished.
    The replies alternate between a tool call and an answer, so a task takes two decisions on average."""
    from store.events import ModelCalled, TaskPhase
    from store.eventstore import EventStore

    with pg_schema() as url, model_server(folder, [TICK, ANSWER], MODEL_DELAY_S) as model_url, \
            EventStore(url) as store:
        pool = Workers(folder, url, model_url, lease_s=10.0)
        try:
            for _ in range(workers):
                pool.start()
            pool.wait_serving(store, workers)
            started = time.monotonic()
            ids = [submit(store, pool.workspace, f"Take the steps of job {n}.", max_steps=30) for n in range(tasks)]
            while True:
                phases = {s.task_id: TaskPhase(s.phase) for s in store.tasks()}
                if all(phases[t].finished for t in ids):
                    break
                if time.monotonic() - started > 30 + tasks * 10:
                    raise RuntimeError(f"tasks unfinished after {time.monotonic() - started:.0f} s")
                time.sleep(0.1)
            seconds = time.monotonic() - started
            _, _, leases = store.workers.snapshot()
        finally:
            pool.stop()
        records = [r for t in ids for r in store.read_stream(t)]
        calls = sum(isinstance(r.event, ModelCalled) for r in records)
        completed = sum(phases[t] == TaskPhase.COMPLETED for t in ids)
    return {"workers": workers, "tasks": tasks, "completed": completed, "seconds": seconds,
            "per_minute": tasks / seconds * 60, "model_calls": calls, "events": len(records),
            "events_per_second": len(records) / seconds}


def run_tasks(args: argparse.Namespace) -> dict:
    out = {}
    for n in WORKERS:
        progress(f"tasks: {args.tasks} short tasks on {n} worker(s)")
        with tempfile.TemporaryDirectory(prefix="agentd-bench-workers-") as folder:
            out[str(n)] = throughput_case(Path(folder), n, args.tasks)
    return out


def takeover(args: argparse.Namespace) -> dict:
    """Two workers run long tasks; the one holding tasks is killed with kill -9, and the time is taken until
    the other holds their leases and until it records each task's next event. A new worker is then started
    beside the survivor, which holds every task now, and the survivor is killed in its turn, `kills` times."""
    from store.eventstore import EventStore

    lease_s = args.lease_s
    kills = []
    with tempfile.TemporaryDirectory(prefix="agentd-bench-takeover-") as folder, pg_schema() as url, \
            model_server(Path(folder), [TICK], LONG_DELAY_S) as model_url, EventStore(url) as store:
        pool = Workers(Path(folder), url, model_url, lease_s=lease_s, tick_s=LONG_TICK_S)
        try:
            pool.start()
            pool.start()
            pool.wait_serving(store, 2)
            # A window policy keeps the long tasks' requests within n_ctx with no summary for the model to write.
            ids = [submit(store, pool.workspace, f"Take the steps of long job {n}.", policy="window:8",
                          max_steps=100_000) for n in range(4)]
            for k in range(args.kills):
                progress(f"takeover: kill -9 {k + 1} of {args.kills} (lease_s {lease_s:g})")
                kills.append(kill_one(store, pool, ids, lease_s))
                if k + 1 < args.kills:
                    pool.start()
                    pool.wait_serving(store, 2)
        finally:
            pool.stop()
    return {"lease_s": lease_s, "heartbeat_s": lease_s / 3, "kills": kills}


def kill_one(store, pool: Workers, ids: list[str], lease_s: float) -> dict:
    by_pid = {p.pid: p for p in pool.living()}
    deadline = time.monotonic() + 60
    while True:
        _, found, leases = store.workers.snapshot()
        pid_of = {w.worker_id: w.pid for w in found}
        held: dict[int, list[str]] = {}
        for lease in leases:
            if lease.task_id in ids and pid_of.get(lease.worker_id) in by_pid:
                held.setdefault(pid_of[lease.worker_id], []).append(lease.task_id)
        # Wait for every task to be held, and the tasks to have taken a step, so the kill falls mid-run.
        if sum(map(len, held.values())) == len(ids) and all(store.task(t).summary.version > 3 for t in ids):
            break
        if time.monotonic() > deadline:
            raise RuntimeError("the long tasks were not all held by a living worker within 60 s")
        time.sleep(0.2)
    victim_pid = max(held, key=lambda pid: len(held[pid]))
    orphans = held[victim_pid]
    victim_id = next(w.worker_id for w in found if w.pid == victim_pid)
    killed_at = time.time()
    by_pid[victim_pid].send_signal(signal.SIGKILL)
    by_pid[victim_pid].wait()
    # A commit the victim sent before the kill has landed by now, and no one else may write to its tasks
    # before their leases run out (at least 2/3 of lease_s after the last heartbeat).
    time.sleep(min(0.5, lease_s / 4))
    versions = {t: store.task(t).summary.version for t in orphans}
    expiry = max(lease.expires_at for lease in store.workers.snapshot()[2] if lease.task_id in orphans)
    taken: dict[str, float] = {}
    stepped: dict[str, float] = {}
    while len(taken) < len(orphans) or len(stepped) < len(orphans):
        now = time.time()
        if now - killed_at > lease_s * 4 + 30:
            raise RuntimeError("the killed worker's tasks were not taken over")
        _, _, leases = store.workers.snapshot()
        for lease in leases:
            if lease.task_id in orphans and lease.worker_id != victim_id:
                taken.setdefault(lease.task_id, now - killed_at)
        for t in orphans:
            if t not in stepped and store.task(t).summary.version > versions[t]:
                stepped[t] = now - killed_at
        time.sleep(0.02)
    return {"tasks": len(orphans), "lease_left_at_kill_s": expiry - killed_at,
            "lease_taken_s": max(taken.values()), "next_event_first_s": min(stepped.values()),
            "next_event_s": max(stepped.values())}


# -- the table ----------------------------------------------------------------------------------------


APPEND_RATIOS = [
    ("PostgreSQL, 1 process: 16 writers / 1 writer", "pg_1x16", "pg_1x1"),
    ("PostgreSQL, 16 writers: 4 processes of 4 / 1 process of 16", "pg_4x4", "pg_1x16"),
    ("PostgreSQL, 4 writers: 4 processes of 1 / 1 process of 4", "pg_4x1", "pg_1x4"),
    ("PostgreSQL: 4 processes of 16 / 1 process of 16", "pg_4x16", "pg_1x16"),
    ("SQLite / PostgreSQL, 1 process, 1 writer", "sqlite_1x1", "pg_1x1"),
    ("SQLite / PostgreSQL, 1 process, 16 writers", "sqlite_1x16", "pg_1x16"),
]


# -- prefix reuse through the shared model server ---------------------------------------------------

REUSE_STEPS = 4


def reuse_prompts() -> list[tuple[str, str]]:
    """(session, prompt) in the order two workers would send them: each task's prompt grows by one
    step's observation per call, and the two tasks take turns; both open with the same instructions."""
    instructions = "".join(f"Rule {i}: answer from the data you were shown, and cite it.\n" for i in range(30))
    calls = []
    for step in range(1, REUSE_STEPS + 1):
        for task in ("t-alpha", "t-beta"):
            steps = "".join(f"Step {n} of {task}: read notes/{task}-{n}.txt, {n * 7} lines.\n" for n in range(step))
            calls.append((task, f"{instructions}Task {task}.\n{steps}Next decision:"))
    return calls


def reuse_of(model, calls: list[tuple[str, str]]) -> dict:
    cached = prompt = 0
    per_call = []
    for session, text in calls:
        stats = model.complete(text, schema=None, max_tokens=8, session=session).stats
        cached += stats.cached_tokens or 0
        prompt += stats.prompt_tokens
        per_call.append(stats.cached_tokens)
    return {"cached_tokens": cached, "prompt_tokens": prompt, "share": cached / prompt, "per_call": per_call}


def run_reuse(args: argparse.Namespace) -> dict:
    from runtime.inference.http import HttpModel
    from runtime.inference.local import LocalModel
    from runtime.inference.model_file import smoke_model_path

    calls = reuse_prompts()
    n_ctx, cache_mb = 4096, 256
    progress("reuse: two tasks' prompts in turn, in-process")
    local = LocalModel(smoke_model_path(), n_ctx, kv_cache_bytes=cache_mb << 20, n_threads=2)
    in_process = reuse_of(local, calls)
    progress("reuse: the same calls through agentd model serve")
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="scale-reuse-") as tmp:
        env = {**os.environ, "PYTHONPATH": str(REPO), "AGENTD_DATA_DIR": tmp, "AGENTD_N_CTX": str(n_ctx),
               "AGENTD_KV_CACHE_MB": str(cache_mb), "AGENTD_THREADS": "2"}
        with open(Path(tmp) / "server.log", "w") as log:
            server = subprocess.Popen(
                [sys.executable, "-m", "runtime.cli", "model", "serve", "--model", "smollm2-135m", "--port", str(port)],
                env=env, stdout=log, stderr=subprocess.STDOUT,
            )
        try:
            wait_for_port(port)
            shared = reuse_of(HttpModel(f"http://127.0.0.1:{port}", template_from=smoke_model_path(), n_ctx=n_ctx),
                              calls)
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=30)
    return {"calls": len(calls), "in_process": in_process, "shared_server": shared}


def render(meta: dict, results: dict) -> str:
    pg = meta["postgres"]
    lines = [
        f"agentd scale-out benchmark  {meta['started_at']}",
        f"{meta['cpus']} CPUs (load average {meta['load_before']} at the start), Python {meta['python']}; "
        f"PostgreSQL {pg.get('server_version')} (synchronous_commit={pg.get('synchronous_commit')}, "
        f"fsync={pg.get('fsync')}, {pg.get('wal_sync_method')}); SQLite WAL, synchronous=full",
    ]
    appends = results.get("appends")
    if appends:
        base = appends["pg_1x1"]["per_second"]
        lines += ["", f"appends: one event per append, {meta['seconds']:g} s per case in each of {meta['rounds']} "
                      "interleaved rounds (slowest-fastest round)",
                  f"  {'store':<12}{'processes':>10}{'writers':>9}{'appends/s':>24}{'ratio':>9}"
                  f"{'commits/s':>11}{'appends/commit':>16}"]
        for key, row in appends.items():
            store = "PostgreSQL" if key.startswith("pg") else "SQLite"
            spread = f"{row['per_second']:,.0f} ({_short(min(row['rounds']))}-{_short(max(row['rounds']))})"
            batch = "-" if row["mean_batch"] is None else f"{row['mean_batch']:.1f}"
            lines.append(f"  {store:<12}{row['processes']:>10}{row['processes'] * row['writers']:>9}{spread:>24}"
                         f"{row['per_second'] / base:>8.2f}x{row['commits_per_second']:>11,.0f}{batch:>16}")
        lines.append("  (writers: threads in all; ratio: to PostgreSQL, 1 process, 1 writer)")
    tasks = results.get("tasks")
    if tasks:
        task_base = tasks["1"]["per_minute"]
        lines += ["", f"tasks: short tasks (a tool call, then an answer) on a scripted model answering in "
                      f"{MODEL_DELAY_S * 1000:.0f} ms, submitted at once to workers already serving",
                  f"  {'workers':<10}{'tasks':>7}{'completed':>11}{'model calls':>13}{'events':>8}{'seconds':>10}"
                  f"{'events/s':>10}{'tasks/min':>11}{'ratio':>9}"]
        for row in tasks.values():
            lines.append(f"  {row['workers']:<10}{row['tasks']:>7}{row['completed']:>11}{row['model_calls']:>13}"
                         f"{row['events']:>8}{row['seconds']:>10.1f}{row['events_per_second']:>10,.0f}"
                         f"{row['per_minute']:>11,.0f}{row['per_minute'] / task_base:>8.2f}x")
    over = results.get("takeover")
    if over:
        lease_s = over["lease_s"]
        lines += ["", f"takeover after kill -9: lease_s {lease_s:g}, heartbeat every {over['heartbeat_s']:g} s, "
                      f"poll every 0.5 s; seconds from the kill",
                  f"  {'kill':<6}{'tasks':>6}{'lease left':>12}{'lease taken':>13}{'/ lease_s':>11}"
                  f"{'next event, first-last task':>30}"]
        for n, k in enumerate(over["kills"], 1):
            lines.append(f"  {n:<6}{k['tasks']:>6}{k['lease_left_at_kill_s']:>12.2f}{k['lease_taken_s']:>13.2f}"
                         f"{k['lease_taken_s'] / lease_s:>10.2f}x"
                         f"{k['next_event_first_s']:>24.2f}-{k['next_event_s']:.2f}")
        taken = sorted(k["lease_taken_s"] for k in over["kills"])
        lines.append(f"  median lease taken {taken[len(taken) // 2]:.2f} s = {taken[len(taken) // 2] / lease_s:.2f} x "
                     f"lease_s (expected between 2/3 lease_s and lease_s + one poll: "
                     f"{lease_s * 2 / 3:.2f}-{lease_s + 0.5:.2f} s)")
    reuse = results.get("reuse")
    if reuse:
        lines += ["", f"reuse: {reuse['calls']} calls, two tasks' growing prompts in turn, smoke model; "
                      "prompt tokens found already evaluated",
                  f"  {'model':<34}{'cached':>9}{'of prompt':>11}{'share':>8}"]
        for label, key in (("in-process (agentd's own cache)", "in_process"), ("agentd model serve", "shared_server")):
            row = reuse[key]
            lines.append(f"  {label:<34}{row['cached_tokens']:>9,}{row['prompt_tokens']:>11,}{row['share']:>8.0%}")
    if appends or tasks or reuse:
        lines += ["", "ratios"]
    if appends:
        rate = {k: v["per_second"] for k, v in appends.items()}
        for label, top, bottom in APPEND_RATIOS:
            lines.append(f"  {label:<58}{rate[top] / rate[bottom]:>8.2f}x")
    if tasks:
        for n in WORKERS[1:]:
            label = f"tasks/min, {n} workers / 1 worker"
            lines.append(f"  {label:<58}{tasks[str(n)]['per_minute'] / task_base:>8.2f}x")
    if reuse:
        label = "reuse share, shared server / in-process"
        lines.append(f"  {label:<58}{reuse['shared_server']['share'] / reuse['in_process']['share']:>8.2f}x")
    return "\n".join(lines)


def _short(value: float) -> str:
    return f"{value / 1000:.1f}k" if value >= 1000 else f"{value:.0f}"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child_append:
        url, writers, seconds = args.child_append
        child_append(url, int(writers), float(seconds))
        return 0
    meta = {
        "started_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), "argv": sys.argv[1:],
        "seconds": args.seconds, "rounds": args.rounds, "tasks": args.tasks, "kills": args.kills,
        "lease_s": args.lease_s, "cpus": os.cpu_count(), "load_before": f"{os.getloadavg()[0]:.1f}",
        "machine": platform.platform(), "python": platform.python_version(), "postgres": pg_settings(),
        "packages": {name: version(name) for name in ("agentd", "sqlalchemy", "psycopg")},
        "git_commit": git(["rev-parse", "HEAD"]),
    }
    results: dict = {}
    if "appends" not in args.skip:
        results["appends"] = run_appends(args)
    if "tasks" not in args.skip:
        results["tasks"] = run_tasks(args)
    if "takeover" not in args.skip:
        results["takeover"] = takeover(args)
    if "reuse" not in args.skip:
        results["reuse"] = run_reuse(args)
    meta["load_after"] = f"{os.getloadavg()[0]:.1f}"
    print(render(meta, results))
    print(f"(1-minute load average {meta['load_before']} at the start, {meta['load_after']} at the end)")
    save(args.json, meta, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
