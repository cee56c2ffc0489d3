"""A model whose replies are scripted, for tests about what code does with a reply (validation,
approvals, tool outcomes). It renders and counts with a real model (the smoke model in tests), so every prompt,
manifest and token figure is real; only the text of each reply is given."""

from __future__ import annotations

import json
from typing import Any, Sequence

from runtime.inference.model import CallStats, Completion, Message
from runtime.inference.local import LocalModel


class ScriptedModel:
    def __init__(self, real: LocalModel, replies: Sequence[str | dict]) -> None:
        self.real = real
        self.replies = [r if isinstance(r, str) else json.dumps(r) for r in replies]
        self.prompts: list[str] = []
        self.name = "scripted"
        self.n_ctx = real.n_ctx

    def render(self, messages: Sequence[Message]) -> str:
        return self.real.render(messages)

    def tokenize(self, text: str) -> list[int]:
        return self.real.tokenize(text)

    def count(self, text: str) -> int:
        return self.real.count(text)

    def complete(
        self, prompt: str, *, schema: dict | None, max_tokens: int, session: str | None = None, progress=None
    ) -> Completion:
        if not self.replies:
            raise AssertionError("the script ran out of replies")
        self.prompts.append(prompt)
        text = self.replies.pop(0)
        tokens, out = self.count(prompt), self.count(text)
        if progress is not None:
            # What a real model reports, in one go: the whole prompt evaluated, then the whole reply.
            for report in (("evaluating", 0, tokens), ("evaluating", tokens, tokens), ("generating", out, max_tokens)):
                progress(*report)
        return Completion(text, CallStats(tokens, 0, tokens, out, 0.0, 0.0), "stop")

    async def acomplete(self, prompt: str, **kw: Any) -> Completion:
        return self.complete(prompt, **kw)

    def stats(self) -> dict:
        return {"model": self.name}
