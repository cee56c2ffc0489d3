"""Tests for runtime.logs: what reaches the log file and the console, and what never does."""

from __future__ import annotations

import json
import logging

import pytest
import structlog

from runtime import logs

OPENAI_KEY = "sk-proj-4f9QwErTyUiOpAsDfGhJkL"
GITHUB_TOKEN = "ghp_ZyXwVuTsRqPoNmLkJiHgFeDcBa0123456789"
SLACK_TOKEN = "xoxb-1234567890-0987654321-AbCdEfGhIj"
AWS_KEY_ID = "AKIAIOSFODNN7EXAMPLE"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhZ2VudGQifQ.c2lnbmF0dXJlLWJ5dGVz"
BEARER = "b3JhbmdlLWp1aWNlLWlzLWdvb2Q"
PLAIN_SECRET = "correct-horse-battery-staple"


@pytest.fixture(autouse=True)
def reset_logging():
    root = logging.getLogger()
    before, level = list(root.handlers), root.level
    yield
    structlog.reset_defaults()
    structlog.contextvars.clear_contextvars()
    for handler in root.handlers[:]:
        if handler not in before:
            root.removeHandler(handler)
            handler.close()
    root.setLevel(level)


@pytest.fixture
def log_file(tmp_path):
    path = tmp_path / "logs" / "agentd.log"
    logs.configure(log_file=path, console=False)
    return path


def lines(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def only_line(path, event):
    found = [line for line in lines(path) if line["event"].startswith(event)]
    assert len(found) == 1, found
    return found[0]


def test_each_line_is_json_with_utc_timestamp_level_logger_and_event(log_file):
    logs.get_logger("agentd.test").info("task started")

    line = only_line(log_file, "task started")
    assert line["level"] == "info"
    assert line["logger"] == "agentd.test"
    assert line["timestamp"].endswith("Z")


def test_values_bound_to_the_context_appear_on_every_line(log_file):
    log = logs.get_logger("agentd.test")
    logs.bind(task_id="task-7")
    with logs.bound(request_id="req-3"):
        log.info("first")
        logging.getLogger("uvicorn.error").info("second")
    log.info("third")
    logs.unbind("task_id")
    log.info("fourth")

    by_event = {line["event"]: line for line in lines(log_file)}
    assert by_event["first"]["task_id"] == by_event["second"]["task_id"] == by_event["third"]["task_id"] == "task-7"
    assert by_event["first"]["request_id"] == by_event["second"]["request_id"] == "req-3"
    assert "request_id" not in by_event["third"]
    assert "task_id" not in by_event["fourth"]


def test_secret_under_a_secret_key_name_is_redacted_even_when_nested(log_file):
    logs.get_logger("agentd.test").info(
        "calling model",
        api_key=PLAIN_SECRET,
        request={"headers": {"Authorization": PLAIN_SECRET}, "items": [{"db_password": PLAIN_SECRET}]},
        max_tokens=512,
    )

    text = log_file.read_text(encoding="utf-8")
    assert PLAIN_SECRET not in text
    line = only_line(log_file, "calling model")
    assert line["api_key"] == "[REDACTED]"
    assert line["request"]["headers"]["Authorization"] == "[REDACTED]"
    assert line["request"]["items"][0]["db_password"] == "[REDACTED]"
    assert line["max_tokens"] == 512


@pytest.mark.parametrize(
    ("message", "secret"),
    [
        (f"upstream rejected {OPENAI_KEY}", OPENAI_KEY),
        (f"sent header Bearer {BEARER}", BEARER),
        (f"cloning with {GITHUB_TOKEN}", GITHUB_TOKEN),
        (f"posting via {SLACK_TOKEN}", SLACK_TOKEN),
        (f"aws id {AWS_KEY_ID} denied", AWS_KEY_ID),
        (f"session {JWT} expired", JWT),
        (f"connecting with password={PLAIN_SECRET} to db", PLAIN_SECRET),
        (f"header x-api-key: {PLAIN_SECRET}", PLAIN_SECRET),
    ],
)
def test_secret_in_message_text_is_redacted_before_writing(log_file, message, secret):
    logs.get_logger("agentd.test").warning(message, detail=f"again: {message}")

    assert secret not in log_file.read_text(encoding="utf-8")
    line = only_line(log_file, message.split()[0])
    assert "[REDACTED]" in line["event"]
    assert "[REDACTED]" in line["detail"]


def test_secret_pair_in_text_keeps_its_key_and_leaves_counts_alone(log_file):
    logs.get_logger("agentd.test").info(f"retry token={PLAIN_SECRET} max_tokens=512")

    assert only_line(log_file, "retry")["event"] == "retry token=[REDACTED] max_tokens=512"


def test_standard_library_logger_lands_in_the_same_file_as_json(log_file):
    logs.get_logger("agentd.test").info("ours")
    logging.getLogger("alembic").warning("upgrading with %s", f"password={PLAIN_SECRET}")

    assert PLAIN_SECRET not in log_file.read_text(encoding="utf-8")
    line = only_line(log_file, "upgrading")
    assert line["logger"] == "alembic"
    assert line["level"] == "warning"
    assert line["event"] == "upgrading with password=[REDACTED]"
    assert "timestamp" in line


def test_level_filters_both_structlog_and_standard_library_lines(tmp_path):
    path = tmp_path / "agentd.log"
    logs.configure(log_file=path, level="warning", console=False)
    logs.get_logger("agentd.test").info("quiet")
    logging.getLogger("uvicorn.error").info("quiet too")
    logs.get_logger("agentd.test").warning("loud")

    assert [line["event"] for line in lines(path)] == ["loud"]


def fail_while_holding_a_secret():
    blob = PLAIN_SECRET  # noqa: F841 - only here so a traceback with locals would show it
    raise RuntimeError(f"upstream answered 401 for {OPENAI_KEY}")


def test_exception_shows_traceback_but_not_frame_variables(log_file):
    try:
        fail_while_holding_a_secret()
    except RuntimeError:
        logs.get_logger("agentd.test").exception("model call failed")

    line = only_line(log_file, "model call failed")
    assert line["level"] == "error"
    assert "Traceback (most recent call last)" in line["exception"]
    assert "fail_while_holding_a_secret" in line["exception"]
    assert "RuntimeError: upstream answered 401 for [REDACTED]" in line["exception"]
    text = log_file.read_text(encoding="utf-8")
    assert PLAIN_SECRET not in text
    assert OPENAI_KEY not in text
    assert "locals" not in text


def test_standard_library_exception_is_rendered_and_redacted_too(log_file):
    try:
        fail_while_holding_a_secret()
    except RuntimeError:
        logging.getLogger("uvicorn.error").error("request failed", exc_info=True)

    line = only_line(log_file, "request failed")
    assert "RuntimeError: upstream answered 401 for [REDACTED]" in line["exception"]
    assert PLAIN_SECRET not in log_file.read_text(encoding="utf-8")


def test_console_output_is_readable_and_redacted(tmp_path, capsys):
    logs.configure(log_file=tmp_path / "agentd.log", console=True)
    logs.bind(task_id="task-7")
    logs.get_logger("agentd.test").info(f"calling with {OPENAI_KEY}", api_key=PLAIN_SECRET)
    try:
        fail_while_holding_a_secret()
    except RuntimeError:
        logs.get_logger("agentd.test").exception("model call failed")

    err = capsys.readouterr().err
    first = err.splitlines()[0]
    with pytest.raises(json.JSONDecodeError):
        json.loads(first)
    assert "calling with [REDACTED]" in first
    assert "api_key=[REDACTED]" in first
    assert "task_id=task-7" in first
    assert "Traceback (most recent call last)" in err
    assert "\x1b[" not in err
    assert OPENAI_KEY not in err
    assert PLAIN_SECRET not in err
    assert "locals" not in err.lower()


def test_console_stays_quiet_when_turned_off(log_file, capsys):
    logs.get_logger("agentd.test").info("file only")

    assert capsys.readouterr().err == ""
    assert only_line(log_file, "file only")


def test_configuring_twice_does_not_duplicate_lines(tmp_path):
    path = tmp_path / "agentd.log"
    logs.configure(log_file=path, console=False)
    logs.configure(log_file=path, console=False)
    logs.get_logger("agentd.test").info("once")
    logging.getLogger("uvicorn.error").info("once too")

    assert [line["event"] for line in lines(path)] == ["once", "once too"]


def test_configure_creates_missing_parent_folders(tmp_path):
    path = tmp_path / "deep" / "er" / "agentd.log"
    logs.configure(log_file=path, console=False)
    logs.get_logger("agentd.test").info("hello")

    assert only_line(path, "hello")


def test_captured_returns_the_events_logged_inside_it(log_file):
    log = logs.get_logger("agentd.test")
    with logs.bound(task_id="task-7"), logs.captured() as events:
        log.info("task started", step=1)
        log.warning("task slow")
    log.info("after capture")

    assert [(e["event"], e["log_level"]) for e in events] == [("task started", "info"), ("task slow", "warning")]
    assert events[0]["step"] == 1
    assert events[0]["task_id"] == "task-7"
    assert [line["event"] for line in lines(log_file)] == ["after capture"]


def test_alembic_step_by_step_narration_is_kept_out_of_the_log(tmp_path):
    path = tmp_path / "agentd.log"
    logs.configure(log_file=path, console=False)
    logging.getLogger("alembic.runtime.migration").info("Context impl SQLiteImpl.")
    logging.getLogger("alembic.runtime.migration").warning("something alembic worries about")

    assert [line["event"] for line in lines(path)] == ["something alembic worries about"]


def test_a_log_file_that_cannot_be_written_is_skipped_quietly_and_says_why(tmp_path, capsys):
    # A file where the log's folder should be: the same refusal a read-only or full disk gives.
    (tmp_path / "logs").write_text("not a folder")
    logs.configure(log_file=tmp_path / "logs" / "agentd.log", console=False)
    logs.get_logger("agentd.test").error("nobody will read this")
    logging.getLogger("uvicorn.error").error("nor this")

    assert capsys.readouterr().err == ""
    assert "agentd.log" in logs.file_problem()
