"""A task's secrets behind placeholders: `[secret:N]` in everything recorded or shown, the value only in a tool call.

`hide` replaces each secret in a text (a value this task already keeps, or one the patterns find) with
its placeholder, keeping a new value in the vault first; the same value gets the same number for the
task's whole life, across processes. `reveal` puts the values back into a tool call's arguments, right
before the tool runs; the recorded arguments keep the placeholders.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runtime.secrets.patterns import SECRETS, Pattern, found
from runtime.secrets.seal import NAME, Seal
from store.errors import AgentdError

if TYPE_CHECKING:
    from store import EventStore, vault as kept
    from store.events import Event

PLACEHOLDER = re.compile(r"\[secret:(\d+)\]")
# Stand-ins for values found in one pass, before the vault has numbered them; never in real text.
_OPEN, _CLOSE = "\ue000", "\ue001"
_MARK = re.compile(f"{_OPEN}(\\d+){_CLOSE}")
# Below this a "secret" is too short to find again safely: every "1" in every text would become one.
MIN_CHARS = 6
# Binary content (a NUL in its first 8 KB) is not searched: the patterns are for text.
_SNIFF = 8192


class UnknownSecret(AgentdError):
    """A placeholder in a tool call that names no secret of its task (another task's, or a guess)."""


class Secrets:
    """Where a data folder's secrets are found and kept: its vault key and the patterns that say what a
    secret is. One per process; `vault` gives a task's."""

    def __init__(self, data_dir: Path, patterns: Sequence[Pattern] = ()) -> None:
        self.seal = Seal(Path(data_dir) / NAME)
        self.patterns: tuple[Pattern, ...] = (*SECRETS, *patterns)
        # Values put back into a tool call in this process: a file the call writes holds them bare, without
        # the label a pattern would know them by, and the artifact store must still seal its copy.
        self._revealed: set[str] = set()

    def vault(self, store: EventStore, task_id: str) -> Vault:
        return Vault(self, store, task_id)

    def revealed(self, values: Iterable[str]) -> None:
        self._revealed.update(values)

    def holds_secret(self, data: bytes) -> bool:
        """Whether a blob must be kept sealed: a secret the patterns find, or a value revealed here."""
        if b"\0" in data[:_SNIFF]:
            return False
        text = data.decode("utf-8", "replace")
        if any(value in text for value in self._revealed):
            return True
        return any(True for _ in found(text, self.patterns))


class Vault:
    """One task's secrets, numbered as its placeholders show them."""

    def __init__(self, secrets: Secrets, store: EventStore, task_id: str) -> None:
        self.secrets = secrets
        self.store = store
        self.task_id = task_id
        self._values: dict[int, str] = {}
        self._loaded = False

    # -- hiding ----------------------------------------------------------------------------------

    def hide(self, text: str) -> str:
        """`text` with every secret replaced by its placeholder; new values are kept before this returns."""
        if not text:
            return text
        self._load()
        work = self._known(text)
        values: list[str] = []
        kinds: dict[str, str] = {}
        for pattern in self.secrets.patterns:
            spans = [_unquoted(work, start, end) for _, _, start, end in found(work, (pattern,))]
            for start, end in reversed(spans):
                value = work[start:end]
                if len(value) < MIN_CHARS or _OPEN in value or PLACEHOLDER.fullmatch(value):
                    continue
                if value not in values:
                    values.append(value)
                    kinds[value] = pattern.kind
                work = work[:start] + f"{_OPEN}{values.index(value)}{_CLOSE}" + work[end:]
        if not values:
            return work
        numbers = self._keep(values, kinds)
        # A value found inside a longer text elsewhere in `work` is hidden there too.
        work = _MARK.sub(lambda m: f"[secret:{numbers[values[int(m.group(1))]]}]", work)
        return self._known(work)

    def hide_all(self, value: Any) -> Any:
        """Every string inside a JSON-like value hidden (dict keys stay: they are names, not data)."""
        if isinstance(value, str):
            return self.hide(value)
        if isinstance(value, Mapping):
            return {k: self.hide_all(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(self.hide_all(v) for v in value)
        return value

    def hide_events(self, events: Sequence[Event]) -> list[Event]:
        """The events as they may be recorded: each one holding a secret is made again with placeholders."""
        out = []
        for event in events:
            data = event.model_dump(mode="json")
            hidden = self.hide_all(data)
            out.append(event if hidden == data else type(event).model_validate(hidden))
        return out

    # -- revealing -------------------------------------------------------------------------------

    def reveal(self, value: Any) -> Any:
        """A tool call's arguments with each placeholder replaced by its value; UnknownSecret for one that
        names no secret of this task."""
        self._load()
        if any(int(n) not in self._values for n in _numbers(value)):
            self._loaded = False  # kept by another process since (a message the user sent): read again
            self._load()
        used: list[str] = []

        def put_back(match: re.Match[str]) -> str:
            number = int(match.group(1))
            if number not in self._values:
                raise UnknownSecret(
                    f"[secret:{number}] names no secret of this task (its vault holds {len(self._values)})"
                )
            used.append(self._values[number])
            return self._values[number]

        revealed = _walk(value, lambda text: PLACEHOLDER.sub(put_back, text))
        self.secrets.revealed(used)
        return revealed

    @property
    def values(self) -> dict[int, str]:
        self._load()
        return dict(self._values)

    # -- the vault -------------------------------------------------------------------------------

    def _known(self, text: str) -> str:
        # Longest first, so a value that contains another is replaced whole.
        for number, value in sorted(self._values.items(), key=lambda item: -len(item[1])):
            if value in text:
                text = text.replace(value, f"[secret:{number}]")
        return text

    def _load(self) -> None:
        if self._loaded:
            return
        from store import vault as kept  # the SQL machinery, only once a task's vault is opened

        with self.store.reading() as conn:
            rows = kept.of_task(conn, self.task_id)
        self._absorb(rows)
        self._loaded = True

    def _keep(self, values: list[str], kinds: Mapping[str, str]) -> dict[str, int]:
        from store import vault as kept

        seal = self.secrets.seal
        new = [kept.New(seal.digest(v), kinds[v], seal.encrypt(v.encode()).decode()) for v in values]
        rows = self.store.in_write_transaction(lambda conn: kept.keep(conn, self.task_id, new))
        self._absorb(rows)
        by_digest = {row.digest: row.number for row in rows}
        return {v: by_digest[item.digest] for v, item in zip(values, new, strict=True)}

    def _absorb(self, rows: Iterable[kept.Kept]) -> None:
        for row in rows:
            if row.number not in self._values:
                self._values[row.number] = self.secrets.seal.decrypt(row.sealed.encode()).decode()


def _unquoted(text: str, start: int, end: int) -> tuple[int, int]:
    """A quoted value's span without its quotes: the secret is what is between them."""
    if end - start >= 2 and text[start] in "\"'" and text[end - 1] == text[start]:
        return start + 1, end - 1
    return start, end


def _numbers(value: Any) -> list[str]:
    found_: list[str] = []
    _walk(value, lambda text: found_.extend(PLACEHOLDER.findall(text)) or text)
    return found_


def _walk(value: Any, fn) -> Any:
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, Mapping):
        return {k: _walk(v, fn) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_walk(v, fn) for v in value)
    return value
