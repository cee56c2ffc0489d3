"""The [mcp] table of agentd.toml: servers reached over stdio or HTTP, the terms of their tools with the
careful defaults, and every bad entry refused in one line naming its key and file."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.config import load_settings
from runtime.errors import ConfigError


def settings_of(tmp_path: Path, toml: str):
    path = tmp_path / "agentd.toml"
    path.write_text(toml)
    return load_settings(path, environ={})


def test_servers_are_read_with_per_tool_terms_over_the_servers_over_the_defaults(tmp_path: Path) -> None:
    mcp = settings_of(tmp_path, """
[mcp.servers.crm]
command = "crm-mcp"
args = ["--readonly"]
env = { CRM_REGION = "eu" }
timeout_s = 20

[mcp.servers.crm.tools.lookup]
effects = ["read"]
approval = false

[mcp.servers.search]
url = "https://search.example/mcp"
headers = { Authorization = "SEARCH_TOKEN" }

[mcp.profiles.workspace]
tools = ["crm/lookup", "search/*"]
""").mcp
    crm = mcp.servers["crm"]
    assert crm.transport == "stdio" and mcp.servers["search"].transport == "http"
    lookup, other = crm.terms("lookup"), crm.terms("rotate")
    assert (lookup.effects, lookup.approval, lookup.timeout_s) == (("read",), False, 20)
    assert (other.effects, other.approval, other.scope, other.timeout_s) == (("external",), True, "external", 20)
    assert mcp.profiles["workspace"].tools == ("crm/lookup", "search/*")


def test_no_mcp_table_means_no_servers(tmp_path: Path) -> None:
    assert settings_of(tmp_path, "port = 7000\n").mcp.servers == {}


@pytest.mark.parametrize(
    ("toml", "key", "why"),
    [
        ('[mcp.servers.s]\nurl = "http://x/mcp"\nheaders = { Authorization = "Bearer sk-123" }\n',
         "mcp.servers.s.headers", "must name an environment variable"),
        ("[mcp.servers.s]\nargs = []\n", "mcp.servers.s", "either `command` (stdio) or `url`"),
        ('[mcp.servers.s]\ncommand = "x"\nurl = "http://x"\n', "mcp.servers.s", "exactly one"),
        ('[mcp.servers.s]\nurl = "http://x"\nargs = ["a"]\n', "mcp.servers.s", "are for a stdio server"),
        ('[mcp.servers.s]\ncommand = "x"\nheaders = { A = "B" }\n', "mcp.servers.s", "for a streamable HTTP"),
        ('[mcp.servers.s]\ncommand = "x"\ncomand = "y"\n', "mcp.servers.s.comand", "unknown setting"),
        ('[mcp.servers.s]\ncommand = "x"\neffects = ["delete"]\n', "mcp.servers.s.effects.0", ""),
        ('[mcp.servers.s]\ncommand = "x"\n[mcp.servers.s.tools.t]\ntimeout_s = 0\n',
         "mcp.servers.s.tools.t.timeout_s", "greater than 0"),
        ('[mcp.servers.S]\ncommand = "x"\n', "mcp.servers", "lowercase"),
        ('[mcp.servers.s]\ncommand = "x"\n[mcp.profiles.workspace]\ntools = ["other/t"]\n', "mcp",
         "SERVER/TOOL or SERVER/*"),
        ('[mcp.servers.s]\nurl = "file:///etc/passwd"\n', "mcp.servers.s.url", ""),
    ],
)
def test_a_bad_mcp_entry_is_one_line_naming_its_key_and_the_file(tmp_path: Path, toml, key, why) -> None:
    with pytest.raises(ConfigError) as err:
        settings_of(tmp_path, toml)
    line = str(err.value)
    assert "\n" not in line and f"(from {tmp_path / 'agentd.toml'})" in line, line
    assert f"{key} " in line or f"{key}' " in line, line
    assert why in line
    assert err.value.exit_code == 2
