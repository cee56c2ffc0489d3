"""`agentd events`: list, follow, export, verify and import the log."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

import click

from runtime.cli._app import App, pass_app
from runtime.output import table
from store import archive, key as signing, log
from store.errors import AgentdError
from store.events import event_types
from store.log import RawEvent
from store.mark import committed

POLL_SECONDS = 0.2


class UnknownType(AgentdError):
    """An event type named on the command line that neither agentd nor the log knows: a usage error."""

    exit_code = 2


class BadKey(AgentdError):
    """A --key that is not a key file agentd made: a usage error."""

    exit_code = 2


def _key(path: Path | None) -> signing.Key | None:
    try:
        return None if path is None else signing.load(path)
    except signing.UnusableKey as e:
        raise BadKey(f"--key {e}") from None


key_option = click.option(
    "--key", "key_path", type=click.Path(path_type=Path, dir_okay=False),
    help="The export.key of the data folder that signed the file: refuse any line or trailer it did not sign.",
)


@click.group()
def events() -> None:
    """Read the event log, follow it, export it and import it."""


def _known_types(conn, types: tuple[str, ...]) -> None:
    """Refuse a type no event can have, rather than list nothing (a type only the log has is fine)."""
    known = set(event_types())
    for name in types:
        if name not in known and not log.has_type(conn, name):
            raise UnknownType(f"no event type {name!r}; the types are {', '.join(sorted(known))}")


def _rows(raws: list[RawEvent]) -> list[tuple]:
    return [
        (r.seq, r.recorded_at[:23].replace("T", " "), r.stream_id, r.stream_version, r.type, r.actor, r.payload)
        for r in raws
    ]


_HEADERS = ["SEQ", "RECORDED (UTC)", "STREAM", "VER", "TYPE", "ACTOR", "PAYLOAD"]


def _print(raws: list[RawEvent], as_json: bool) -> None:
    if as_json:
        for r in raws:
            click.echo(archive.line_of(r))
    else:
        click.echo(table(_rows(raws), _HEADERS))


@events.command("list")
@click.option("--task", "task_id", help="Only this task's events.")
@click.option("--type", "types", multiple=True, help="Only events of this type (repeatable).")
@click.option("--after", type=click.IntRange(min=0), default=0, help="Only events after this seq.")
@click.option("--limit", type=click.IntRange(min=0), default=100, show_default=True, help="Show the last N (0: all).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line, as `events export` writes them.")
@pass_app
def list_(app: App, task_id: str | None, types: tuple[str, ...], after: int, limit: int, as_json: bool) -> None:
    """List events in seq order (by default the last 100)."""
    with app.store().reading() as conn:
        _known_types(conn, types)
        raws = list(
            log.iter_raw(conn, after=after, stream_id=task_id, types=types, limit=limit or None, descending=bool(limit))
        )
    if limit:
        raws.reverse()
    _print(raws, as_json)


@events.command()
@click.option("--task", "task_id", help="Only this task's events.")
@click.option("--type", "types", multiple=True, help="Only events of this type (repeatable).")
@click.option("--last", type=click.IntRange(min=0), default=10, show_default=True, help="Print this many first.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@pass_app
def tail(app: App, task_id: str | None, types: tuple[str, ...], last: int, as_json: bool) -> None:
    """Print the latest events, then follow new ones until interrupted."""
    store = app.store()
    with store.reading() as conn:
        _known_types(conn, types)
        raws = list(log.iter_raw(conn, stream_id=task_id, types=types, limit=last, descending=True))[::-1]
        cursor = log.last_seq(conn)
    if raws:
        _print_lines(raws, as_json)
    stop = _stop_on_signals()
    while not stop.is_set():
        # Seq is assigned under the write lock, so nothing can commit below the cursor later.
        with store.reading() as conn:
            raws = list(log.iter_raw(conn, after=cursor, stream_id=task_id, types=types))
            cursor = max(cursor, log.last_seq(conn))
        if raws:
            _print_lines(raws, as_json)
        else:
            stop.wait(POLL_SECONDS)


def _stop_on_signals() -> threading.Event:
    """Ctrl-C or SIGTERM ends the follow loop between polls, not in the middle of a database read."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    return stop


def _print_lines(raws: list[RawEvent], as_json: bool) -> None:
    for r in raws:
        if as_json:
            click.echo(archive.line_of(r))
        else:
            click.echo(f"{r.seq:>8}  {r.recorded_at}  {r.stream_id}#{r.stream_version}  {r.type}  {r.payload}")
    sys.stdout.flush()


@events.command()
@click.option("-o", "--output", type=click.Path(path_type=Path, dir_okay=False), help="Write here instead of stdout.")
@click.option("--sign", is_flag=True, help="Sign each line and the trailer with the data folder's export.key.")
@click.option(
    "--redact", is_flag=True,
    help="Replace whatever looks like a secret in any event with [redacted:KIND] and hash the chain again: "
    "a log to share, which still imports and replays.",
)
@click.option(
    "--vault", "vault_path", type=click.Path(path_type=Path, dir_okay=False),
    help="Also write the secrets behind every [secret:N] to this file, in plain text and readable by you "
    "alone, for `events import --vault` in another data folder.",
)
@pass_app
def export(app: App, output: Path | None, sign: bool, redact: bool, vault_path: Path | None) -> None:
    """Write the whole log as JSON Lines, one event per line in seq order, then a trailer line.

    Each line carries its event's chain hash; the trailer holds the count, the last seq and the last
    hash, so that a file cut short or changed is refused by `events import` and `events verify`. The
    chain needs no secret, so it cannot tell this agentd's export from one edited and hashed again:
    --sign adds each hash's HMAC under the data folder's export.key (made on first need, readable by
    you alone, never exported), which `events verify --key` and `events import --key` check.

    The export never holds the vault, where a task keeps the secrets its events show as [secret:N]: a
    task imported elsewhere has placeholders and no values, unless --vault writes them to a file of
    their own, tied to this export by its last hash. --redact also takes out what the secret patterns
    (built-in and secret_patterns) find anywhere in the log, and hashes the chain of what it writes.

    A log behind its high-water mark, or whose chain breaks, is refused in the line `db check` gives.
    """
    if vault_path is not None and redact:
        raise click.UsageError("--vault writes the secrets --redact takes out: give one or the other")
    if vault_path is not None and output is not None and vault_path.resolve() == output.resolve():
        raise click.UsageError("--vault needs a file of its own, not the export's")
    store = app.store()
    settings = app.settings()
    key = signing.of_folder(settings.data_dir) if sign else None
    rewrite = None
    if redact:
        from runtime.secrets import compiled
        from runtime.secrets.export import redactor

        rewrite = redactor(compiled(settings.secret_patterns))
    mark = committed(store.url)
    secrets = 0
    with store.reading() as conn, contextlib.ExitStack() as files:
        # Each file is renamed into place only once both are whole: the vault's first, then the export's.
        out = sys.stdout if output is None else files.enter_context(_staged(output))
        sealed = archive.export(conn, out, committed=mark, key=key, rewrite=rewrite)
        if vault_path is not None:
            # Read in the same snapshot as the events: every secret their placeholders name, and no other.
            from runtime.secrets import bundle
            from runtime.secrets.seal import NAME, Seal

            with _staged(vault_path) as f:
                secrets = bundle.write(conn, Seal(settings.data_dir / NAME), f, sealed.last_hash)
    if output is not None:
        signed = "" if key is None else f", signed with key {key.id}"
        click.echo(f"exported {sealed.count} events to {output}{signed}", err=True)
    if vault_path is not None:
        click.echo(f"wrote {secrets} secrets to {vault_path}, in plain text: keep it as you keep the keys", err=True)


@contextlib.contextmanager
def _staged(output: Path) -> Iterator[TextIO]:
    """A file written next to `output` and renamed over it when the block ends without an error, so a
    failed export never leaves half a file. It is made readable by its owner alone, and keeps that."""
    fd, tmp = tempfile.mkstemp(dir=output.parent if str(output.parent) else ".", prefix=".export-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, output)
    except BaseException:
        os.unlink(tmp)
        raise


@events.command()
@click.argument("source", type=click.File("r", encoding="utf-8"))
@key_option
def verify(source, key_path: Path | None) -> None:
    """Check an export (or - for stdin) as `events import` would, without importing it.

    Every line and its hash, the chain of hashes, the trailer, and the rules every append keeps (a tool
    call has one result, starts only once proposed, and so on); with --key, every line's signature and
    the trailer's. Prints ok with what the file holds, or names the first line or seq that is wrong.
    Without --key, ok means the file is whole and in order, not who made it.
    """
    key = _key(key_path)
    sealed = archive.verify(source, key)
    if sealed.key_id is None:
        signature = "unsigned"
    elif key is None:
        signature = f"signed with key {sealed.key_id}, not checked (give --key to check it)"
    else:
        signature = f"signed with this key ({key.id})"
    if sealed.count == 0:
        click.echo(f"ok: no events; {signature}")
    else:
        events_ = "1 event" if sealed.count == 1 else f"{sealed.count} events"
        click.echo(f"ok: {events_}, seq 1 to {sealed.last_seq}, chain ending in {sealed.last_hash}; {signature}")


@events.command("import")
@click.argument("source", type=click.File("r", encoding="utf-8"))
@key_option
@click.option(
    "--vault", "vault_file", type=click.File("r", encoding="utf-8"),
    help="The secrets `events export --vault` wrote beside this export, sealed again under this data "
    "folder's vault key.",
)
@pass_app
def import_(app: App, source, key_path: Path | None, vault_file) -> None:
    """Load a JSON Lines export (or - for stdin) into an empty store: all of it, or nothing.

    A file without the trailer `events export` writes last, or whose lines do not match it, is refused;
    with --key, so is one with a line or a trailer the key did not sign. With --vault, the secrets go in
    with the events, in the same transaction: a vault file written beside another export is refused,
    and nothing is imported.
    """
    key = _key(key_path)
    store = app.store()
    seal = None
    if vault_file is not None:
        from runtime.secrets.seal import NAME, Seal

        seal = Seal(app.settings().data_dir / NAME)

    def load(conn) -> tuple[int, int]:
        sealed = archive.import_into(conn, source, key)
        if vault_file is None:
            return sealed.count, 0
        from runtime.secrets import bundle

        return sealed.count, bundle.put(conn, seal, vault_file, sealed.last_hash)

    count, secrets = store.in_write_transaction(load)
    click.echo(f"imported {count} events" + (f" and {secrets} secrets" if vault_file is not None else ""))
