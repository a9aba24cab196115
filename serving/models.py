"""Catalog of open models the toolkit knows how to size and serve.

Architecture figures (layers, KV heads, head size, context; hidden, intermediate and vocabulary
sizes and attention heads, which vLLM's start-up profile run depends on, serving.activation) are
the `config.json` values of each model's Hugging Face repository (`repo`; for Qwen2.5-VL its text
model's fields); tests/test_activation.py recomputes each card's parameter count from them.
Weights sizes are the safetensors totals of the same repositories, in decimal GB. Quantized
variants are the widely used checkpoints named in `repo`, with their own safetensors totals
where the research notes saw them (Llama-3.2-1B FP8 2.02 GB, Llama-3-8B FP8 9.08 GB,
Qwen2.5-VL-7B FP8 10.1 GB); the others are estimated at 0.55x (8-bit) or 0.35x (4-bit) of
BF16, because embeddings and lm_head stay 16-bit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from serving.hardware import GpuSpec, Vendor


class Quantization(StrEnum):
    NONE = "none"  # the native BF16 weights
    FP8 = "fp8"
    INT8 = "int8"
    INT4 = "int4"


# Bytes per weight, for sizing variants the catalog lacks a measured total for.
BYTES_PER_WEIGHT: dict[Quantization, float] = {
    Quantization.NONE: 2.0,
    Quantization.FP8: 1.0,
    Quantization.INT8: 1.0,
    Quantization.INT4: 0.5,
}


@dataclass(frozen=True)
class Variant:
    quantization: Quantization
    repo: str
    weights_gb: float


@dataclass(frozen=True)
class ModelCard:
    id: str
    repo: str
    params_b: float
    layers: int
    kv_heads: int
    head_dim: int
    context_max: int
    weights_gb: float
    hidden_size: int
    intermediate_size: int
    vocab_size: int
    attention_heads: int
    tied_embeddings: bool  # `tie_word_embeddings`: lm_head shares the embedding matrix
    modality: str = "text"
    variants: tuple[Variant, ...] = field(default=())

    @property
    def kv_bytes_per_token(self) -> int:
        """K and V, every layer, BF16 cache."""
        return 2 * self.layers * self.kv_heads * self.head_dim * 2

    def weights_for(self, quantization: Quantization) -> float | None:
        if quantization is Quantization.NONE:
            return self.weights_gb
        variant = next((v for v in self.variants if v.quantization is quantization), None)
        return variant.weights_gb if variant else None

    def variant_weights_gb(self, quantization: Quantization) -> float:
        """Weights of a variant the card has; asking for one it lacks is a programming error
        (the planner only chooses from `quantizations`)."""
        weights = self.weights_for(quantization)
        if weights is None:
            raise ValueError(f"{self.id} has no {quantization} variant")
        return weights

    @property
    def quantizations(self) -> tuple[Quantization, ...]:
        return (Quantization.NONE, *(v.quantization for v in self.variants))


@dataclass(frozen=True)
class Shape:
    """The `config.json` fields of a card's text model that vLLM's activation profile needs."""

    hidden_size: int
    intermediate_size: int
    vocab_size: int
    attention_heads: int
    tied_embeddings: bool


def _card(
    id: str, repo: str, params_b: float, layers: int, kv_heads: int, head_dim: int,
    context_max: int, weights_gb: float, shape: Shape, variants: tuple[Variant, ...] = (),
    modality: str = "text",
) -> ModelCard:
    return ModelCard(id, repo, params_b, layers, kv_heads, head_dim, context_max, weights_gb,
                     shape.hidden_size, shape.intermediate_size, shape.vocab_size,
                     shape.attention_heads, shape.tied_embeddings, modality, variants)


# config.json of each repo: hidden_size, intermediate_size, vocab_size, num_attention_heads,
# tie_word_embeddings. Llama 3.x share the 128,256-token vocabulary, Qwen2.5 152,064.
_LLAMA_32_1B = Shape(2048, 8192, 128256, 32, True)  # meta-llama/Llama-3.2-1B-Instruct
_LLAMA_32_3B = Shape(3072, 8192, 128256, 24, True)  # meta-llama/Llama-3.2-3B-Instruct
_LLAMA_31_8B = Shape(4096, 14336, 128256, 32, False)  # meta-llama/Llama-3.1-8B-Instruct
_QWEN_25_7B = Shape(3584, 18944, 152064, 28, False)  # Qwen/Qwen2.5-7B-Instruct
_LLAMA_33_70B = Shape(8192, 28672, 128256, 64, False)  # meta-llama/Llama-3.3-70B-Instruct
# Qwen/Qwen2.5-VL-7B-Instruct: the text model's fields (the same as Qwen2.5-7B's); its
# vision_config (32 blocks of hidden 1280, intermediate 3420) is the rest of params_b.
_QWEN_25_VL_7B = Shape(3584, 18944, 152064, 28, False)


CATALOG: dict[str, ModelCard] = {
    card.id: card
    for card in (
        _card("llama-3.2-1b-instruct", "meta-llama/Llama-3.2-1B-Instruct", 1.24, 16, 8, 64,
              131072, 2.47, _LLAMA_32_1B, (
                  Variant(Quantization.FP8, "RedHatAI/Llama-3.2-1B-Instruct-FP8-dynamic", 2.02),
              )),
        _card("llama-3.2-3b-instruct", "meta-llama/Llama-3.2-3B-Instruct", 3.21, 28, 8, 128,
              131072, 6.43, _LLAMA_32_3B, (
                  Variant(Quantization.FP8, "RedHatAI/Llama-3.2-3B-Instruct-FP8-dynamic", 3.54),
                  Variant(Quantization.INT8,
                          "RedHatAI/Llama-3.2-3B-Instruct-quantized.w8a8", 3.54),
              )),
        _card("llama-3.1-8b-instruct", "meta-llama/Llama-3.1-8B-Instruct", 8.03, 32, 8, 128,
              131072, 16.07, _LLAMA_31_8B, (
                  Variant(Quantization.FP8, "RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8", 9.08),
                  Variant(Quantization.INT8,
                          "RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w8a8", 9.08),
                  Variant(Quantization.INT4,
                          "hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4", 5.73),
              )),
        _card("qwen2.5-7b-instruct", "Qwen/Qwen2.5-7B-Instruct", 7.62, 28, 4, 128, 32768,
              15.23, _QWEN_25_7B, (
                  Variant(Quantization.FP8, "RedHatAI/Qwen2.5-7B-Instruct-FP8-dynamic", 8.38),
                  Variant(Quantization.INT8, "RedHatAI/Qwen2.5-7B-Instruct-quantized.w8a8", 8.38),
                  Variant(Quantization.INT4, "Qwen/Qwen2.5-7B-Instruct-AWQ", 5.58),
              )),
        _card("llama-3.3-70b-instruct", "meta-llama/Llama-3.3-70B-Instruct", 70.6, 80, 8, 128,
              131072, 141.1, _LLAMA_33_70B, (
                  Variant(Quantization.FP8, "RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic", 72.7),
                  Variant(Quantization.INT4,
                          "RedHatAI/Llama-3.3-70B-Instruct-quantized.w4a16", 39.9),
              )),
        _card("qwen2.5-vl-7b-instruct", "Qwen/Qwen2.5-VL-7B-Instruct", 8.29, 28, 4, 128, 128000,
              16.58, _QWEN_25_VL_7B, (
                  Variant(Quantization.FP8, "RedHatAI/Qwen2.5-VL-7B-Instruct-FP8-Dynamic", 10.1),
              ), modality="vision-language"),
    )
}


def quantizations(card: ModelCard, allowed: tuple[Quantization, ...], gpu: GpuSpec) -> list[Quantization]:
    """Native weights plus the allowed variants the GPU has kernels for (FP8 needs FP8 tensor
    cores; AWQ/w4a16 INT4 kernels are NVIDIA-only in vLLM's support table)."""
    supported = {Quantization.FP8: gpu.fp8, Quantization.INT8: gpu.int8,
                 Quantization.INT4: gpu.vendor is Vendor.NVIDIA}
    return [Quantization.NONE] + [q for q in card.quantizations[1:] if q in allowed and supported[q]]


__all__ = ["BYTES_PER_WEIGHT", "CATALOG", "ModelCard", "Quantization", "Shape", "Variant", "quantizations"]
