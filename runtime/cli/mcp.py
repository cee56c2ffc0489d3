"""`agentd mcp`: the MCP servers of the config, whether each answers, and the tools agentd takes from it.

Each command starts the configured servers as a task would (a stdio server's command runs, an HTTP
server is connected to), lists their tools with the sha256 a task pins and the terms the config gives
them, and stops the servers again. A server that is down is one line saying why; a tool agentd holds
back (a name it cannot use, a description that reads like instructions, a schema it cannot check)
is listed with the reason.
"""

from __future__ import annotations

import click

from runtime.cli._app import App, json_option, pass_app
from runtime.errors import NotFound
from runtime.output import echo_json, table

HASH_CHARS = 12


@click.group()
def mcp() -> None:
    """MCP servers: their state, and their tools with hashes and effects."""


def _servers(app: App, only: str | None = None) -> list[dict]:
    from runtime.cli.tool import _registry
    from runtime.mcp import consent
    from runtime.mcp.gateway import Gateway
    from store import log
    from store.events import MCP_TOOLS_STREAM

    settings = app.settings()
    if only is not None and only not in settings.mcp.servers:
        known = ", ".join(sorted(settings.mcp.servers)) or "none configured"
        raise NotFound(f"no MCP server {only!r} in the config (servers: {known})")
    gateway = Gateway(
        settings.mcp, log_dir=settings.data_dir / "logs" if settings.data_dir.is_dir() else None,
        config_file=settings.origin("mcp"),
    )
    try:
        gateway.open(_registry(app))
        if settings.database_url is not None or settings.db_path.is_file():
            # A tool changed since its definition was accepted shows as held back; nothing is recorded here.
            with app.reader().reading() as conn:
                gateway.judge(consent.accepted(log.iter_records(conn, stream_id=MCP_TOOLS_STREAM)))
        return [row for row in gateway.servers() if only is None or row["server"] == only]
    finally:
        gateway.close()


@mcp.command("list")
@json_option
@pass_app
def list_(app: App, as_json: bool) -> None:
    """Every configured server, its state, and each tool agentd offers of it: hash, effects, approval."""
    rows = _servers(app)
    if as_json:
        echo_json(rows)
        return
    if not rows:
        click.echo("no MCP servers configured ([mcp.servers.NAME] in agentd.toml)")
        return
    click.echo(table([(r["server"], r["transport"], r["state"], len(r["tools"]), len(r["held"])) for r in rows],
                     ["server", "transport", "state", "tools", "held back"]))
    tools = [(r["server"], t["name"], t["sha256"][:HASH_CHARS], ",".join(t["effects"]),
              "yes" if t["approval"] else "") for r in rows for t in r["tools"]]
    if tools:
        click.echo()
        click.echo(table(tools, ["server", "tool", "sha256", "effects", "approval"]))


@mcp.command()
@click.argument("server")
@json_option
@pass_app
def show(app: App, server: str, as_json: bool) -> None:
    """One server: how it is reached, its state, every tool with its terms and description, the tools held back,
    and the resources and prompts read as evidence."""
    [row] = _servers(app, server)
    if as_json:
        echo_json(row)
        return
    click.echo(f"server     {row['server']} ({row['transport']}: {row['target']})")
    click.echo(f"state      {row['state']}")
    for t in row["tools"]:
        click.echo()
        click.echo(f"tool       {t['name']}")
        click.echo(f"sha256     {t['sha256']}")
        click.echo(f"effects    {','.join(t['effects'])}; approval {'yes' if t['approval'] else 'no'}; "
                   f"scope {t['scope']}; timeout {t['timeout_s']:g}s")
        click.echo(f"described  {t['description']}")
    for h in row["held"]:
        click.echo()
        click.echo(f"held back  {h['name']}: {h['reason']}")
    for d in row["evidence"]:
        click.echo()
        click.echo(f"evidence   {d['kind']} {d['ref']} ({d['title']}), sha256 {d['sha256'][:12]}, "
                   f"{d['chars']:,} characters")
