"""`agentd knowledge`: documents added to the knowledge base, and what retrieval would hand a task."""

from __future__ import annotations

import getpass
from pathlib import Path

import click

from runtime.cli._app import App, json_option, pass_app
from runtime.output import echo_json, table


@click.group()
def knowledge() -> None:
    """The knowledge base: documents added with a tenant and scope, and what retrieval would hand a task."""


def _base(app: App):
    from runtime.knowledge.base import KnowledgeBase

    return KnowledgeBase(app.store(), app.artifacts(), app.settings().data_dir / "knowledge.db")


@knowledge.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--tenant", "tenants", multiple=True, required=True,
              help="Who may retrieve it (repeatable); * for every tenant.")
@click.option("--scope", help="The scope it is retrieved in (default: general, which every profile reads).")
@click.option("--authority", type=float, help="0 to 1: policy 1.0, how-to 0.7, forum post 0.3 (default: the "
              "front matter's, else 1.0).")
@click.option("--kind", help="document (evidence) or example (a few-shot example, which names its "
              "policy_version); default: the front matter's, else document.")
@json_option
@pass_app
def add(app: App, paths: tuple[Path, ...], tenants: tuple[str, ...], scope: str | None, authority: float | None,
        kind: str | None, as_json: bool) -> None:
    """Add Markdown and text documents (folders: every .md and .txt file in them); a changed document is
    a new version, the same text again adds nothing."""
    base = _base(app)
    try:
        added = base.add_paths(paths, tenants=tenants, scope=scope, authority=authority, kind=kind,
                               by=f"cli:{getpass.getuser()}")
    finally:
        base.close()
    if as_json:
        echo_json([{"doc_id": a.doc_id, "version": a.version, "kind": a.kind, "chunks": a.chunks, "new": a.new}
                   for a in added])
        return
    for a in added:
        what = "an example" if a.kind == "example" else f"{a.chunks} chunks"
        click.echo(f"{'added' if a.new else 'unchanged'} {a.doc_id}@{a.version} ({what})")


@knowledge.command("list")
@json_option
@pass_app
def list_(app: App, as_json: bool) -> None:
    """Every version of every document: its tenants, scope, authority, and whether it is current."""
    base = _base(app)
    try:
        base.catch_up()
        docs = base.index.documents()
    finally:
        base.close()
    if as_json:
        echo_json([
            {"doc_id": d.doc_id, "version": d.version, "seq": d.seq, "tenants": list(d.tenants), "scope": d.scope,
             "authority": d.authority, "current": d.current, "chunks": d.chunks, "kind": d.kind,
             "policy_version": d.policy_version}
            for d in docs
        ])
        return
    click.echo(table(
        [(d.doc_id, d.version, ",".join(d.tenants), d.scope, f"{d.authority:g}", "yes" if d.current else "no",
          d.chunks, d.kind if d.policy_version is None else f"{d.kind} for {d.policy_version}") for d in docs],
        ["DOCUMENT", "VERSION", "TENANTS", "SCOPE", "AUTHORITY", "CURRENT", "CHUNKS", "KIND"],
    ))


@knowledge.command()
@click.argument("query")
@click.option("--tenant", required=True, help="The tenant whose task would ask.")
@click.option("--scope", "scopes", multiple=True, help="Scopes read (repeatable; default: general).")
@json_option
@pass_app
def search(app: App, query: str, tenant: str, scopes: tuple[str, ...], as_json: bool) -> None:
    """What retrieval would hand a decision asking QUERY: the candidates in scope with their scores,
    those selected and those left out, and why."""
    from runtime.agent.request import injection_risk
    from runtime.inference.scripted import stand_in_tokens
    from runtime.knowledge import evidence

    base = _base(app)
    try:
        found = base.candidates(query, tenant=tenant, scopes=scopes or ("general",))
    finally:
        base.close()
    weights = app.settings().evidence
    packed = evidence.retrieve(
        found, tenant=tenant, query=query, exclude=set(), budget=weights.budget_tokens, limit=weights.per_decision,
        count=lambda text: len(stand_in_tokens(text)), min_utility=weights.min_utility, min_share=weights.min_share,
        risk=lambda s: injection_risk(s, weights.injection_risk), weights=weights,
    )
    rows = [(c.section.cite, c.utility, c.tokens, "selected") for c in packed.selected]
    rows += [(c.section.cite, c.utility, c.tokens, why) for c, why in packed.left_out]
    if as_json:
        echo_json({"candidates": len(found), "budget": packed.budget, "used": packed.used,
                   "items": [{"cite": r[0], "utility": r[1], "tokens": r[2], "outcome": r[3]} for r in rows]})
        return
    if not rows:
        click.echo(f"(no document of tenant {tenant} in scope {', '.join(scopes or ('general',))} matches)")
        return
    click.echo(table(rows, ["CITE", "UTILITY", "TOKENS", "OUTCOME"]))
    click.echo(f"{len(packed.selected)} selected, {packed.used} of {packed.budget} tokens (estimated)")
