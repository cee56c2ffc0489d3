"""A model's chat template, rendered exactly as llama-cpp-python renders it for chat completions."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from runtime.errors import InferenceError, ModelFileError
from runtime.inference.model import Message


class ChatTemplate:
    """A model's Jinja chat template, rendered exactly as llama-cpp-python renders it for chat completions."""

    def __init__(self, source: str, *, bos_token: str, eos_token: str, origin: str) -> None:
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        self.source = source
        self.origin = origin
        self._formatter = Jinja2ChatFormatter(
            template=source, bos_token=bos_token, eos_token=eos_token, add_generation_prompt=True
        )

    @classmethod
    def of_model(cls, model, origin: str) -> ChatTemplate | None:
        """The template in a loaded model's GGUF metadata (a `llama_cpp._internals.LlamaModel`), if any."""
        source = model.metadata().get("tokenizer.chat_template")
        if not source:
            return None
        return cls(
            source,
            bos_token=_token_text(model, model.token_bos()),
            eos_token=_token_text(model, model.token_eos()),
            origin=origin,
        )

    def render(self, messages: Sequence[Message]) -> str:
        try:
            return self._formatter(messages=[{"role": m.role, "content": m.content} for m in messages]).prompt
        except Exception as e:  # the template's own raise_exception() and Jinja errors alike
            raise InferenceError(f"the chat template of {self.origin} refused the messages: {e}") from e


def _token_text(model, token: int) -> str:
    return model.token_get_text(token) if token != -1 else ""


def no_template(origin: str) -> ModelFileError:
    return ModelFileError(
        f"{origin} carries no chat template (GGUF key tokenizer.chat_template), so agentd cannot build "
        "prompts for it; use a chat/instruct model"
    )


def template_of_file(path: Path) -> ChatTemplate:
    import llama_cpp
    from llama_cpp._internals import LlamaModel

    # The vocabulary and metadata only: no weights, no context.
    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    try:
        model = LlamaModel(path_model=str(path), params=params, verbose=False)
    except ValueError as e:
        raise ModelFileError(f"model file {path} could not be read by llama.cpp: {e}") from e
    try:
        template = ChatTemplate.of_model(model, origin=f"model file {path}")
    finally:
        model.close()
    if template is None:
        raise no_template(f"model file {path}")
    return template
