"""Logging for agentd: JSON lines to a file, readable lines on stderr, secrets redacted on the way out."""

from __future__ import annotations

import contextlib
import logging
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

from runtime.secrets.patterns import SECRETS, found

REDACTED = "[REDACTED]"

# A key containing any of these (case-insensitive) has its value redacted, whatever the value looks like.
SECRET_KEY_NAMES = (
    "api_key",
    "apikey",
    "api-key",
    "token",
    "password",
    "passwd",
    "secret",
    "authorization",
    "cookie",
    "private_key",
    "credential",
)

# Text that looks like a secret, wherever it appears. Only the `secret` group is replaced when there is one,
# so the reader still sees what kind of thing was hidden.
_VALUE_END = r"""[\s"',;&)}\]]"""
_VALUE = r"""[^\s"',;&)}\]]+"""
SECRET_PATTERNS = (
    # key=value, key: value, "key": "value". It runs first so "Authorization: Bearer ..." goes as a whole,
    # and it leaves a bare number alone because max_tokens=512 is a count, not a token.
    re.compile(
        r"(?i)[\w.-]*(?:" + "|".join(map(re.escape, SECRET_KEY_NAMES)) + r")[\w.-]*[\"']?\s*[:=]\s*"
        rf"(?P<secret>(?![\d.]+(?:{_VALUE_END}|$))"
        rf"""(?:{re.escape(REDACTED)}|"[^"]*"|'[^']*'|(?:Bearer|Basic)\s+{_VALUE}|{_VALUE}))"""
    ),
    re.compile(r"(?<![A-Za-z0-9])sk-[A-Za-z0-9_-]{16,}"),
    re.compile(r"(?i)\bBearer\s+(?P<secret>[A-Za-z0-9._~+/=-]{8,})"),
    re.compile(r"(?<![A-Za-z0-9])(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"),
    re.compile(r"(?<![A-Za-z0-9])xox[abpr]-[A-Za-z0-9-]{10,}"),
    re.compile(r"(?<![A-Z0-9])AKIA[0-9A-Z]{16}(?![A-Z0-9])"),
    re.compile(r"(?<![A-Za-z0-9])eyJ[A-Za-z0-9_-]+\.eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*"),
)

_SECRET_KEY = re.compile("|".join(map(re.escape, SECRET_KEY_NAMES)), re.IGNORECASE)

_installed_handlers: list[logging.Handler] = []


def configure(*, log_file: Path | None, level: str = "info", console: bool | None = None) -> None:
    """Route structlog and standard-library logging to `log_file` (JSON lines) and, if asked, stderr.

    Safe to call again: handlers from an earlier call are closed and replaced. `console=None` means
    "only when stderr is a terminal", so a daemon with redirected stderr writes just the file.
    """
    numeric_level = logging.getLevelNamesMapping().get(level.upper())
    if numeric_level is None:
        raise ValueError(f"unknown log level {level!r}")
    if console is None:
        console = _stderr_is_tty()

    # Both paths share these, so a uvicorn or alembic line looks like one of ours.
    common: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_logger_name,
        structlog.stdlib.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    # Turning exc_info into plain traceback text here means frame locals never reach a renderer,
    # and the text passes through redaction like any other string.
    to_text: list[Processor] = [structlog.processors.format_exc_info]
    foreign_pre_chain = [*common, *to_text]

    handlers: list[logging.Handler] = []
    if log_file is not None:
        # A read-only or full data directory must not stop a command that only reads: the file is
        # opened at the first line, and a failure then is remembered (file_problem), not raised.
        with contextlib.suppress(OSError):
            log_file.parent.mkdir(parents=True, exist_ok=True)
        file_handler = _FileHandler(log_file, encoding="utf-8", delay=True)
        file_handler.setFormatter(_formatter(structlog.processors.JSONRenderer(), foreign_pre_chain))
        handlers.append(file_handler)
    if console:
        renderer = structlog.dev.ConsoleRenderer(
            colors=_stderr_is_tty(),
            exception_formatter=structlog.dev.plain_traceback,
        )
        console_handler = logging.StreamHandler(sys.stderr)
        console_handler.setFormatter(_formatter(renderer, foreign_pre_chain))
        console_handler.addFilter(_not_file_only)
        handlers.append(console_handler)

    root = logging.getLogger()
    # Only our own handlers are replaced; ones installed by others (pytest's caplog, say) stay.
    for old in _installed_handlers:
        root.removeHandler(old)
        old.close()
    _installed_handlers[:] = handlers
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(numeric_level)
    # Alembic narrates every migration step at INFO; agentd logs the outcome itself.
    logging.getLogger("alembic").setLevel(max(numeric_level, logging.WARNING))
    # APScheduler logs every run of every job at INFO; the schedule's own events say what fired.
    logging.getLogger("apscheduler").setLevel(max(numeric_level, logging.WARNING))

    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *common,
            structlog.stdlib.PositionalArgumentsFormatter(),
            structlog.processors.StackInfoRenderer(),
            *to_text,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        # configure() may run again (tests, CLI re-entry); cached loggers would keep the old chain.
        cache_logger_on_first_use=False,
    )


def configured() -> bool:
    """Whether `configure` has installed handlers (before that, logging would go to structlog's default)."""
    return bool(_installed_handlers)


def file_problem() -> str | None:
    """Why the log file's latest line could not be written (the disk is full or read-only), or None."""
    for handler in _installed_handlers:
        if isinstance(handler, _FileHandler) and handler.problem is not None:
            return handler.problem
    return None


class _FileHandler(logging.FileHandler):
    """The log file, which a full or read-only disk silences rather than crashing the command.

    logging's own answer to a failed write is a traceback on stderr for every line ("--- Logging
    error ---"); the user is told in one line by the command instead, and the next line tries again.
    """

    problem: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if self.stream is None:
                self.stream = self._open()
        except OSError:
            self.handleError(record)
            return
        self.problem = None
        super().emit(record)

    def handleError(self, record: logging.LogRecord) -> None:
        error = sys.exc_info()[1]
        if not isinstance(error, OSError):
            super().handleError(record)
            return
        self.problem = f"{self.baseFilename}: {error.strerror or error}"
        # Reopened at the next line, so logging resumes once there is space again.
        stream, self.stream = self.stream, None
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()


def _not_file_only(record: logging.LogRecord) -> bool:
    # A line logged with file_only=True is for the log file: the user was already told in one line.
    return not (isinstance(record.msg, dict) and record.msg.get("file_only"))


def get_logger(name: str | None = None) -> structlog.stdlib.BoundLogger:
    """A structlog logger; `name` becomes the `logger` field (default: the calling module)."""
    return structlog.stdlib.get_logger(name)


def bind(**kw: Any) -> None:
    """Add fields to every line logged from this context (task, thread or asyncio task) on."""
    structlog.contextvars.bind_contextvars(**kw)


def unbind(*keys: str) -> None:
    """Stop adding the named fields."""
    structlog.contextvars.unbind_contextvars(*keys)


@contextlib.contextmanager
def bound(**kw: Any) -> Iterator[None]:
    """Add fields to every line logged inside the block, restoring earlier values afterwards."""
    with structlog.contextvars.bound_contextvars(**kw):
        yield


@contextlib.contextmanager
def captured() -> Iterator[list[EventDict]]:
    """agentd's helper for tests: yields the list of event dicts logged inside the block.

    Events are collected instead of written, before rendering and redaction, with the
    context-bound fields merged in and `log_level` set.
    """
    with structlog.testing.capture_logs(processors=[structlog.contextvars.merge_contextvars]) as events:
        yield events


def redact_secrets(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    """Structlog processor: hide secret values by key name and secret-looking text by pattern."""
    return {key: _redact_item(key, value) for key, value in event_dict.items()}


def redact_text(text: str) -> str:
    """Replace every secret-looking part of `text`: by the log's own patterns (a value under a secret's
    name), then by the ones the vault and memory use (runtime.secrets.patterns)."""
    for pattern in SECRET_PATTERNS:
        text = pattern.sub(_mask, text)
    spans = sorted((start, end) for _, _, start, end in found(text, SECRETS))
    for start, end in reversed(_disjoint(spans)):
        text = text[:start] + REDACTED + text[end:]
    return text


def _disjoint(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for start, end in spans:
        if out and start < out[-1][1]:
            out[-1] = (out[-1][0], max(end, out[-1][1]))
        else:
            out.append((start, end))
    return out


def _redact_item(key: Any, value: Any) -> Any:
    # Numbers and booleans under a secret-ish key are counts and flags (max_tokens, has_password).
    if isinstance(key, str) and _SECRET_KEY.search(key) and not isinstance(value, (int, float)):
        return REDACTED
    return _redact_value(value)


def _redact_value(value: Any) -> Any:
    if isinstance(value, str):
        return redact_text(value)
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, dict):
        return {k: _redact_item(k, v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_value(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_redact_value(v) for v in value)
    # Renderers would repr() anything else after we are done; doing it now lets us see that text.
    return redact_text(repr(value))


def _mask(match: re.Match[str]) -> str:
    if "secret" not in match.re.groupindex:
        return REDACTED
    whole, start = match.group(0), match.start(0)
    return whole[: match.start("secret") - start] + REDACTED + whole[match.end("secret") - start :]


def _formatter(renderer: Processor, foreign_pre_chain: list[Processor]) -> logging.Formatter:
    return structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=foreign_pre_chain,
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            redact_secrets,
            renderer,
        ],
    )


def _stderr_is_tty() -> bool:
    stream = sys.stderr
    return stream is not None and hasattr(stream, "isatty") and stream.isatty()
