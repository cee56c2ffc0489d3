"""The [evidence] table of agentd.toml: what a section of evidence is worth to a decision, and how much
of the request evidence may take.

utility = relevance x authority x freshness - stale penalty - redundancy - injection risk (seed 000).
The defaults are the measured ones; a team whose documents differ (many versions kept side by side,
runbooks that quote attacks) tunes them here.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Weights(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    stale_freshness: float = Field(
        0.2, ge=0, le=1, description="freshness of a superseded version (a current one has 1.0)"
    )
    stale_penalty: float = Field(0.2, ge=0, le=1, description="taken off a superseded version's utility")
    redundancy: float = Field(0.1, ge=0, le=1, description="taken off a second section of a document already chosen")
    injection_risk: float = Field(
        0.3, ge=0, le=1, description="taken off a section with instruction-like or role-imitating text"
    )
    # A section must earn its tokens: with a query of a goal and a tool result, one shared word (a plan's
    # name, "account") scores a tenth or so, which used to let unrelated documents into the window.
    min_utility: float = Field(0.2, ge=0, le=1, description="the least utility a section needs to be shown")
    # And it must be close to the best match: measured on the default model, shown the expired-key and
    # rate-limit sections beside the revoked-key one, it explained a revoked key as an expired plan or a 429.
    min_share: float = Field(
        0.5, ge=0, le=1, description="the least share of the best match's utility a section needs to be shown"
    )
    budget_tokens: int = Field(1200, ge=1, description="tokens of evidence one request may hold")
    per_decision: int = Field(3, ge=1, le=20, description="sections of evidence one decision may be shown")


DEFAULT = Weights()
