"""The local model: one llama.cpp model per process, loaded from a GGUF file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from store.errors import ModelFileError


@dataclass(frozen=True)
class LoadedModel:
    path: Path
    llama: object
    n_ctx: int
    n_ctx_train: int

    @property
    def name(self) -> str:
        return self.path.name


def load_model(path: Path, n_ctx: int | None = None) -> LoadedModel:
    """Load the model; `n_ctx=None` uses the context length the model was trained with."""
    from llama_cpp import Llama  # imported here: loading the native library is slow and few commands need it

    try:
        llama = Llama(model_path=str(path), n_ctx=n_ctx or 0, flash_attn=True, verbose=False)
    except (ValueError, RuntimeError) as e:
        raise ModelFileError(f"model file {path} could not be loaded by llama.cpp: {e}") from e
    return LoadedModel(path=path, llama=llama, n_ctx=llama.n_ctx(), n_ctx_train=llama._model.n_ctx_train())
