"""vLLM's activation reserve (serving.activation) and the start-up check it feeds.

Expected figures are worked by hand from the config.json fields and vLLM 0.11's default batch
limits (arg_utils.py: 2048 tokens / 256 sequences below 70 GiB, 8192 / 1024 above, A100 excepted),
never read back from the module under test.
"""

from __future__ import annotations

import pytest

from serving.activation import activation_reserve_gb, replica_reserve_gb
from serving.hardware import GIB_GB, GpuModel
from serving.measured import starts
from serving.models import CATALOG, ModelCard, Quantization
from serving.profiles import SliceKind
from serving.replica_sim import replica_engine
from serving.slices import SharingMode, fits, served_context

TEXT_MODELS = [c for c in CATALOG.values() if c.modality == "text"]


def llama_params(card: ModelCard) -> float:
    """The standard decoder-only count (embeddings, q/k/v/o, gated MLP, two RMSNorms a layer, the
    final norm, lm_head unless tied); Qwen2 adds q/k/v biases."""
    h, q_dim, kv_dim = card.hidden_size, card.attention_heads * card.head_dim, card.kv_heads * card.head_dim
    attention = h * q_dim + 2 * h * kv_dim + q_dim * h
    if card.id.startswith("qwen"):
        attention += q_dim + 2 * kv_dim
    layer = attention + 3 * h * card.intermediate_size + 2 * h
    embeddings = card.vocab_size * h * (1 if card.tied_embeddings else 2)
    return embeddings + card.layers * layer + h


@pytest.mark.parametrize("card", TEXT_MODELS, ids=lambda c: c.id)
def test_card_shape_reproduces_the_published_parameter_count(card: ModelCard) -> None:
    # params_b is the model card's published size; the shape fields come from config.json.
    assert llama_params(card) / 1e9 == pytest.approx(card.params_b, rel=0.02)


def test_vl_card_is_its_text_model_plus_the_vision_tower() -> None:
    """Qwen2.5-VL-7B's vision_config: 32 blocks of hidden 1280 (qkv 3840 with bias, proj, gated
    MLP of 3420 with biases, two RMSNorms), a 2x2 patch merger (5120 -> 5120 -> 3584, biases,
    RMSNorm) and a Conv3d patch embedding 3 x 2 x 14 x 14 -> 1280."""
    card = CATALOG["qwen2.5-vl-7b-instruct"]
    v = 1280
    block = (v * 3 * v + 3 * v) + (v * v + v) + (2 * v * 3420 + 2 * 3420) + (3420 * v + v) + 2 * v
    merger = (4 * v * 4 * v + 4 * v) + (4 * v * 3584 + 3584) + v
    vision = 32 * block + merger + 3 * 2 * 14 * 14 * v
    assert (llama_params(card) + vision) / 1e9 == pytest.approx(card.params_b, rel=0.01)


def test_reserve_of_llama_8b_on_an_l4_by_hand() -> None:
    """24 GB L4 (22.4 GiB < 70): 2048 tokens, 256 sequences. MLP: 2048 x 3 x 14,336 x 2 B
    = 176,160,768 B plus residual and input 2 x 2048 x 4096 x 2 B = 33,554,432 B: 209,715,200 B.
    Sampler: 256 x 128,256 x 4 B + 2048 x 4096 x 2 B = 148,111,360 B, smaller."""
    card = CATALOG["llama-3.1-8b-instruct"]
    assert activation_reserve_gb(card, Quantization.NONE, 1, 2048, 256) == pytest.approx(0.2097152)
    assert replica_reserve_gb(card, Quantization.NONE, 1, 24, "L4") == pytest.approx(0.2097152)
    # Quantized weights: the GEMMs still write BF16, so the same reserve.
    assert activation_reserve_gb(card, Quantization.FP8, 1, 2048, 256) == pytest.approx(0.2097152)
    # Usable 24 x 0.9 = 21.6 GB, less 16.07 GB weights and the reserve: 5.3202848 GB at
    # 131,072 B a token (32 layers x 8 KV heads x 128 x 2 x 2 B) = 40,590 tokens -> 40,448.
    assert served_context(card, Quantization.NONE, 24, None, device_name="L4") == 40448
    engine = replica_engine(card, SliceKind(GpuModel.L4), Quantization.NONE, 40448, 24, 21.6)
    assert engine.kv_blocks == 40590 // 16


def test_sampler_dominates_small_models_and_tp_splits_only_the_mlp() -> None:
    """Llama-3.3-70B on 2x H100 (80 GB = 74.5 GiB: 8192 tokens, 1024 sequences), per GPU:
    MLP 8192 x 3 x 28,672 / 2 x 2 B + 2 x 8192 x 8192 x 2 B = 973,078,528 B; sampler
    1024 x 128,256 x 4 B + 8192 x 8192 x 2 B = 659,554,304 B (the vocabulary is not split).
    Llama-3.2-1B on the same device: sampler 525,336,576 + 8192 x 2048 x 2 = 558,891,008 B
    above its MLP 8192 x 3 x 8192 x 2 + 2 x 8192 x 2048 x 2 = 469,762,048 B."""
    big, small = CATALOG["llama-3.3-70b-instruct"], CATALOG["llama-3.2-1b-instruct"]
    assert activation_reserve_gb(big, Quantization.NONE, 2, 8192, 1024) == pytest.approx(0.973078528)
    assert replica_reserve_gb(big, Quantization.NONE, 2, 80, "H100-80GB") == pytest.approx(2 * 0.973078528)
    assert activation_reserve_gb(small, Quantization.NONE, 1, 8192, 1024) == pytest.approx(0.558891008)
    # An A100 keeps the small defaults whatever its memory (vLLM 0.11 arg_utils).
    assert replica_reserve_gb(small, Quantization.NONE, 1, 80, "A100-80GB") == pytest.approx(
        activation_reserve_gb(small, Quantization.NONE, 1, 2048, 256))


def test_70b_bf16_on_two_h100s_no_longer_starts() -> None:
    """141.1 GB weights + 1.946 GB reserve + 4096 x 327,680 B (1.342 GB) = 144.39 GB > 2 x 80 x
    0.9 = 144 GB: without the reserve it fitted by 0.4 GB; vLLM would refuse it."""
    card = CATALOG["llama-3.3-70b-instruct"]
    assert not fits(card, Quantization.NONE, 80, 2, device_name="H100-80GB")
    assert fits(card, Quantization.NONE, 80, 4, device_name="H100-80GB")
    refused = starts(card, SliceKind(GpuModel.H100_80GB, tensor_parallel=2), Quantization.NONE, 4096)
    assert refused is not None and "vLLM would not start" in str(refused)


def test_vl_model_on_an_h100_nvl_2g_24gb_slice() -> None:
    """The instance reports 21.62 GiB = 23.214 GB; 2048 tokens / 256 sequences. Reserve: MLP
    2048 x 3 x 18,944 x 2 B + 2 x 2048 x 3584 x 2 B = 262,144,000 B (sampler 256 x 152,064 x 4 B
    + 2048 x 3584 x 2 B = 170,393,600 B). Usable 23.214 x 0.9 = 20.8926 GB, less 16.58 GB and
    0.262144 GB = 4.0505 GB at 57,344 B a token (28 x 4 x 128 x 2 x 2) = 70,634 tokens."""
    card = CATALOG["qwen2.5-vl-7b-instruct"]
    kind = SliceKind(GpuModel.H100_NVL, SharingMode.MIG, mig_profile="2g.24gb")
    device = round(21.62 * GIB_GB, 3)  # the catalog keeps MB
    assert kind.memory_gb == device
    by_hand = int((device * 0.9 - 16.58 - 0.262144) * 1e9 // 57344)
    assert by_hand == 70634
    assert served_context(card, Quantization.NONE, kind.memory_gb, None,
                          device_name="H100-NVL-94GB") == by_hand // 256 * 256
    assert starts(card, kind, Quantization.NONE, by_hand // 256 * 256) is None
    # The default context (87k) and the model's maximum do not start there.
    refused = starts(card, kind, Quantization.NONE, 87_000)
    assert refused is not None and f"max_model_len <= {by_hand}" in str(refused)
    # FP8 weights (10.1 GB) leave room for the whole 128k context.
    assert starts(card, kind, Quantization.FP8, card.context_max) is None


def test_reserve_rejects_nonsense_limits() -> None:
    card = CATALOG["llama-3.1-8b-instruct"]
    with pytest.raises(ValueError, match="max_num_batched_tokens"):
        activation_reserve_gb(card, Quantization.NONE, 1, 0, 256)
    with pytest.raises(ValueError, match="no int4 variant"):
        activation_reserve_gb(CATALOG["llama-3.2-1b-instruct"], Quantization.INT4, 1, 2048, 256)


def test_a_max_model_len_vllm_could_not_start_is_refused_at_plan_time(tmp_path, capsys) -> None:
    """dev's llama-3b (FP8 only, on a 2-way time-sliced L4): 24 GB x 0.45 = 10.8 GB usable less
    3.54 GB of weights and the 0.144 GB reserve (sampler 256 x 128,256 x 4 B + 2048 x 3072 x 2 B
    = 143,917,056 B) leaves 7.116 GB, 62,047 tokens at 114,688 B (28 x 8 x 128 x 2 x 2). 62,800
    passes the closed form's screen (no reserve: 63,302 tokens) but not vLLM's start-up check."""
    import copy

    from rtip.cli import main
    from tests.conftest import stack_doc, write_stack

    card, kind = CATALOG["llama-3.2-3b-instruct"], SliceKind(GpuModel.L4, SharingMode.TIME_SLICE, shares=2)
    assert starts(card, kind, Quantization.FP8, 62047) is None
    assert starts(card, kind, Quantization.FP8, 62048) is not None
    platform = copy.deepcopy(stack_doc("dev")["config"]["rtip:platform"])
    assert platform["models"][0]["catalog"] == card.id and platform["models"][0]["pool"] == "l4"
    platform["models"][0]["max_model_len"] = 62800
    code = main(["plan", str(write_stack(tmp_path, platform))])
    out = capsys.readouterr()
    assert code == 2 and out.out == "" and "Traceback" not in out.err
    assert "rtip:platform.models[0]" in out.err
    assert "vLLM would not start: max_model_len 62800" in out.err and "max_model_len <= 62047" in out.err


def test_stated_batch_limits_size_the_reserve_too() -> None:
    """Llama-3.1-8B FP8 on an H100 at 0.95 with 2048 tokens and 1024 sequences (the Lambda
    benchmark's flags): sampler 1024 x 128,256 x 4 B + 2048 x 4096 x 2 B = 542,113,792 B above the
    MLP's 209,715,200 B; 76 GB - 9.08 GB - 0.542 GB = 66.378 GB at 131,072 B a token."""
    card, kind = CATALOG["llama-3.1-8b-instruct"], SliceKind(GpuModel.H100_80GB)
    engine = replica_engine(card, kind, Quantization.FP8, 2000, 80, 76, batch_limits=(2048, 1024))
    assert (engine.max_num_batched_tokens, engine.max_num_seqs) == (2048, 1024)
    assert engine.kv_blocks == int((76 - 9.08 - 0.542113792) * 1e9 // 131072) // 16
