"""Platform detection (real CPU platform, faked ROCm/CUDA values) and the ROCm pitfall hints."""

import pytest
from run_builders import make_run, make_step

from specviz.config import SpecConfig
from specviz.platforms import (
    DFLASH_ROCM_ATTN,
    EAGLE3_ROCM_LAYER0,
    attention_backends_from_log,
    detect_platform,
    pitfall_hints,
)
from specviz.runfile import Request
from specviz.serving.server import local_device


def test_this_machine_is_the_cpu_platform():
    platform_name, device = local_device()
    assert platform_name == "cpu" and device


@pytest.mark.parametrize("vllm_name,hip,cuda,expected", [
    ("rocm", "6.4.1", None, "rocm"),
    ("cuda", None, "12.8", "cuda"),
    ("cpu", None, None, "cpu"),
    (None, "6.4.1", None, "rocm"),        # vLLM's detection failed: torch was built for ROCm
    (None, None, "12.8", "cuda"),
    ("unspecified", "7.1", None, "rocm"),
    (None, None, None, "unknown"),
])
def test_detect_platform(vllm_name, hip, cuda, expected):
    assert detect_platform(vllm_name, torch_hip=hip, torch_cuda=cuda) == expected


def test_attention_backends_from_vllm_log_lines():
    log = "\n".join([
        "(EngineCore pid=1) INFO [rocm.py:850] Using TRITON_ATTN backend out of potential backends: ['TRITON_ATTN'].",
        "(EngineCore pid=1) INFO [cuda.py:507] Using FLASH_ATTN attention backend out of potential backends: [...]",
        "(EngineCore pid=1) INFO [rocm.py:750] Using ROCM_ATTN backend (selected via --attention-backend).",
        "(EngineCore pid=1) INFO [rocm.py:850] Using TRITON_ATTN backend out of potential backends: ['TRITON_ATTN'].",
        "INFO Using default backend TORCH_SDPA for vit attention",
    ])
    assert attention_backends_from_log(log) == ["TRITON_ATTN", "FLASH_ATTN", "ROCM_ATTN"]


def _run(method: str, platform: str, accepted_per_step: list[int], concurrency: int = 1):
    """k=3 steps accepting the given numbers of drafts (token ids are arbitrary but consistent)."""
    steps, out = [], []
    for i, a in enumerate(accepted_per_step):
        drafts = [10 + i, 11 + i, 12 + i]
        sampled = drafts[:a] + [99]
        steps.append(make_step(i, drafts, sampled))
        out += sampled
    req = Request(request_id="r", prompt="p", output_token_ids=out, output_text="x", start_time_s=0.0,
                  finish_reason="length", steps=steps)
    return make_run([req], k=3, platform=platform, concurrency=concurrency,
                    spec=SpecConfig(method=method, num_speculative_tokens=3, model="d"))


def test_eagle3_on_rocm_with_collapsed_first_position_gets_the_hint():
    assert pitfall_hints(_run("eagle3", "rocm", [0, 0, 0, 1])) == [EAGLE3_ROCM_LAYER0]  # 25% at position 1
    assert pitfall_hints(_run("eagle3", "rocm", [2, 3, 1, 0])) == []                   # 75%: healthy
    assert pitfall_hints(_run("eagle3", "cuda", [0, 0, 0, 0])) == []                   # not the ROCm pitfall


def test_dflash_on_rocm_collapsing_only_when_batched_gets_the_hint():
    assert pitfall_hints(_run("dflash", "rocm", [0, 1, 0, 0], concurrency=4)) == [DFLASH_ROCM_ATTN]  # AL 1.25
    assert pitfall_hints(_run("dflash", "rocm", [0, 1, 0, 0], concurrency=1)) == []
    assert pitfall_hints(_run("dflash", "rocm", [3, 3, 2, 1], concurrency=4)) == []
