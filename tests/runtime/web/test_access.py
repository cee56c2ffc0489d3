"""Access to the web page: the page token, sessions, CSRF tokens, and refusing to listen off loopback."""

from __future__ import annotations

import stat
import threading
from pathlib import Path

import pytest

from runtime.errors import ConfigError
from runtime.web import access


def test_the_page_token_is_made_once_readable_by_its_owner_only_and_kept(tmp_path: Path) -> None:
    data = tmp_path / "data"
    token = access.page_token(data)
    assert len(token) >= 24
    assert stat.S_IMODE((data / access.TOKEN_FILE).stat().st_mode) == 0o600
    assert access.page_token(data) == token
    assert [p.name for p in data.iterdir()] == [access.TOKEN_FILE], "no temporary file is left behind"


def test_processes_starting_at_once_agree_on_one_token(tmp_path: Path) -> None:
    found: list[str] = []
    threads = [threading.Thread(target=lambda: found.append(access.page_token(tmp_path))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(found)) == 1 and len(found) == 8


def test_a_damaged_token_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / access.TOKEN_FILE).write_text("short\n")
    with pytest.raises(ConfigError, match="no usable page token"):
        access.page_token(tmp_path)


def test_a_session_is_valid_only_under_the_token_that_made_it() -> None:
    token, other = "t" * 32, "u" * 32
    cookie = access.new_session(token)
    assert access.valid_session(token, cookie)
    assert not access.valid_session(other, cookie)
    assert not access.valid_session(token, cookie + "0")
    assert not access.valid_session(token, None) and not access.valid_session(token, "no-dot")
    assert access.new_session(token) != cookie, "each login is a session of its own"


def test_a_csrf_token_belongs_to_one_session() -> None:
    token = "t" * 32
    one, two = access.new_session(token), access.new_session(token)
    assert access.valid_csrf(token, one, access.csrf_token(token, one))
    assert not access.valid_csrf(token, two, access.csrf_token(token, one))
    assert not access.valid_csrf(token, one, None) and not access.valid_csrf(token, None, "x")


def test_the_offered_token_must_match_exactly() -> None:
    assert access.valid_token("t" * 32, "t" * 32)
    assert not access.valid_token("t" * 32, "t" * 31) and not access.valid_token("t" * 32, None)


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost", "127.0.0.2"])
def test_loopback_addresses_need_no_permission(host: str) -> None:
    access.check_binding(host, allow_remote=False)


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.10", "::", "agentd.example.com"])
def test_listening_where_other_machines_reach_needs_allow_remote(host: str) -> None:
    with pytest.raises(ConfigError, match="allow_remote"):
        access.check_binding(host, allow_remote=False)
    access.check_binding(host, allow_remote=True)


def test_serve_on_a_public_address_without_allow_remote_exits_with_one_line(agentd, tmp_path: Path) -> None:
    env = {"AGENTD_DATA_DIR": str(tmp_path / "data")}
    out = agentd("serve", "--host", "0.0.0.0", "--port", "1", env=env)
    assert out.returncode == 2
    assert out.stderr.startswith("agentd: ") and len(out.stderr.strip().splitlines()) == 1
    assert "allow_remote" in out.stderr
    assert not (tmp_path / "data" / "agentd.pid").exists()
