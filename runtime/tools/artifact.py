"""The read_artifact tool: page through a masked output this task produced, by its artifact ref."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from runtime.errors import NotFound
from runtime.tools.contract import Effect, Tool, ToolContext, ToolContract, ToolFailure, ToolRefused
from store.errors import StoreError

# The trusted fact naming the refs this task may read: refs its own masked outputs produced, taken from the log.
FACT_ARTIFACT_REFS = "artifact_refs"
MAX_PAGE_CHARS = 1500


class ReadArtifactArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ref: str = Field(pattern=r"^artifact://sha256/[0-9a-f]{64}$", description="an artifact_ref from an observation")
    offset: int = Field(0, ge=0, description="first character to return")
    limit: int = Field(MAX_PAGE_CHARS, ge=1, le=MAX_PAGE_CHARS, description="characters to return at most")


class ReadArtifactOutput(BaseModel):
    ref: str
    offset: int = Field(ge=0)
    total_chars: int = Field(ge=0)
    next_offset: int | None = Field(description="offset of the next page; null at the end")
    content: str


class ReadArtifact(Tool[ReadArtifactArgs, ReadArtifactOutput]):
    contract = ToolContract(
        name="read_artifact",
        description=(
            "Read one page of a long tool output that an earlier observation replaced by an artifact_ref "
            "(the full output, as JSON). Ask for the next page with next_offset."
        ),
        input_model=ReadArtifactArgs,
        output_model=ReadArtifactOutput,
        effects=[Effect.READ],
        idempotent=True,
        scope="task",
        needs="artifact",
        timeout_s=10,
        preconditions=("the ref came from an observation in this task",),
        errors={
            "artifact_not_in_scope": "the ref was not produced by this task",
            "artifact_missing": "the artifact is no longer stored",
            "artifact_corrupt": "the stored artifact no longer matches its hash",
        },
        summary_fields=("ref", "offset", "total_chars", "next_offset"),
        # Pages are bounded by `limit`; masking a page would only hand out another ref to page through.
        mask_output=False,
    )

    def authorize(self, ctx: ToolContext, args: ReadArtifactArgs) -> None:
        if args.ref not in ctx.facts.get(FACT_ARTIFACT_REFS, ()):
            raise ToolRefused("artifact_not_in_scope", f"{args.ref} was not produced by this task", {"ref": args.ref})

    def run(self, ctx: ToolContext, args: ReadArtifactArgs) -> ReadArtifactOutput:
        try:
            data = ctx.artifacts.get(args.ref)
        except NotFound:
            raise ToolFailure("artifact_missing", f"{args.ref} is not stored", {"ref": args.ref}) from None
        except StoreError:
            raise ToolFailure("artifact_corrupt", f"{args.ref} is damaged", {"ref": args.ref}) from None
        text = data.decode("utf-8", errors="replace")
        end = min(len(text), args.offset + args.limit)
        return ReadArtifactOutput(
            ref=args.ref,
            offset=args.offset,
            total_chars=len(text),
            next_offset=end if end < len(text) else None,
            content=text[args.offset : end],
        )
