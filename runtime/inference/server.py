"""The model server several workers share: llama-cpp-python's OpenAI-compatible server, reporting the
one figure it leaves out.

llama.cpp's own `llama-server` ends each completion with how much of its prompt it found already in the
KV cache (`timings.cache_n`) and how much it evaluated (`timings.prompt_n`), which `HttpModel` records
as the call's cached and evaluated tokens. llama-cpp-python's server says nothing of it, so a task run
through it showed no reuse in `task show --calls`. The served model here adds the same two figures to
its final chunk, counted where llama-cpp-python decides them rather than estimated by agentd.

The server, its routes, its lock around the one model and its RAM cache of prompt states are
llama-cpp-python's own; this module only starts them, with requests queued rather than interrupted, and
swaps the loaded model's class.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import llama_cpp


class ReportingLlama(llama_cpp.Llama):
    """A `Llama` whose completions end with llama-server's `timings` of prompt reuse.

    `generate` keeps the longest prefix the context shares with the prompt (after the RAM cache has
    restored the best saved state) and evaluates the rest; the context's length at its first `eval` is
    therefore the reused prefix. A prompt found whole is sampled from at once, with no `eval` first.
    """

    _evaluated_from: int | None = None
    _reuse: tuple[int, int] | None = None

    def eval(self, tokens: Sequence[int]) -> None:
        if self._evaluated_from is None:
            self._evaluated_from = self.n_tokens
        super().eval(tokens)

    def generate(self, tokens: Sequence[int], *args: Any, **kwargs: Any) -> Iterator[int]:
        tokens = list(tokens)
        self._evaluated_from = None
        self._reuse = None
        for token in super().generate(tokens, *args, **kwargs):
            if self._reuse is None:
                cached = len(tokens) if self._evaluated_from is None else self._evaluated_from
                self._reuse = (len(tokens), cached)
            yield token

    def _create_completion(self, *args: Any, **kwargs: Any) -> Iterator[dict]:
        # A generator in both modes: streamed, its last chunk carries the finish reason; otherwise it
        # yields the one whole completion.
        for chunk in super()._create_completion(*args, **kwargs):
            choices = chunk.get("choices") or [{}]
            if self._reuse is not None and choices[0].get("finish_reason") is not None:
                prompt, cached = self._reuse
                chunk["timings"] = {"prompt_n": prompt - cached, "cache_n": cached}
            yield chunk


def serve(model: Path, *, host: str, port: int, n_ctx: int, threads: int | None, cache_bytes: int) -> None:
    """Serve `model` at host:port until stopped, keeping each prompt's state in RAM (up to
    `cache_bytes`) so that a task's next decision finds its prefix."""
    import uvicorn
    from llama_cpp.server import app as server_app
    from llama_cpp.server.settings import ModelSettings, ServerSettings

    settings = ModelSettings(
        model=str(model),
        # 0: the context the model was trained with, as agentd's own model takes it.
        n_ctx=n_ctx,
        cache=True,
        cache_type="ram",
        cache_size=cache_bytes,
        **({"n_threads": threads} if threads else {}),
    )
    # interrupt_requests is on by default: a request arriving while another streams ends that one early
    # with `[DONE]`, so one worker's call would cut off another's reply mid-answer. Requests wait instead.
    server = ServerSettings(host=host, port=port, interrupt_requests=False)
    app = server_app.create_app(server_settings=server, model_settings=[settings])
    # create_app loads the one model into the server's proxy, which hands that same object to every
    # request (a request naming another model gets the default when only one is configured).
    loaded = server_app._llama_proxy()
    loaded.__class__ = ReportingLlama
    uvicorn.run(app, host=host, port=port)
