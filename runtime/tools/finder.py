"""The search tool: the workspace's lines that best match some words, from the content index.

search_files finds an exact text; this finds by meaning's nearest cheap stand-in, words: "nightly
backups" finds the line "The nightly backups go to ..." in whichever file holds it, ranked by BM25,
with its path, line number and the lines around it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from runtime.content import ContentIndex, Found
from runtime.tools.contract import Effect, Tool, ToolContext, ToolContract

LIMIT = 8


class SearchArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=300, description="words to look for, e.g. 'nightly backups'")


class Line(BaseModel):
    path: str
    line: int = Field(ge=1)
    text: str
    before: str | None = Field(None, description="the line above, when it is not blank")
    after: str | None = Field(None, description="the line below, when it is not blank")


class SearchOutput(BaseModel):
    query: str
    matches: list[Line]
    files_indexed: int = Field(ge=0)
    files_left_out: int = Field(ge=0, description="too large, or over the index's bounds")


class Search(Tool[SearchArgs, SearchOutput]):
    contract = ToolContract(
        name="search",
        description=(
            "Find the lines of the workspace's text files that best match some words, best first, each with "
            "its path, line number and the lines around it. Use it to find which file says something when "
            "the file names do not tell; then read_file that file."
        ),
        input_model=SearchArgs,
        output_model=SearchOutput,
        effects=[Effect.READ],
        idempotent=True,
        scope="workspace",
        timeout_s=20,
        summary_fields=("query", "files_indexed"),
    )

    def run(self, ctx: ToolContext, args: SearchArgs) -> SearchOutput:
        found, indexed, skipped = best_lines(ctx, args.query, LIMIT)
        matches = [Line(path=f.path, line=f.line, text=f.text, before=f.before, after=f.after) for f in found]
        return SearchOutput(query=args.query, matches=matches, files_indexed=indexed, files_left_out=skipped)


def best_lines(ctx: ToolContext, words: str, limit: int) -> tuple[list[Found], int, int]:
    """The workspace's lines that best match `words`, best first; how many files the index holds; how
    many it left out."""
    # The index lives with agentd's data, beside the artifact store, never in the workspace.
    content = ContentIndex(ctx.workspace, ctx.artifacts.root.parent / "content", ctx.protected)
    try:
        found = content.find(words, limit)
        return found, len(content.index.known()), content.skipped
    finally:
        content.close()
