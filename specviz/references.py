"""Published reference points: numbers measured by others, with where they come from.

Plain data. Pages may draw them beside measured figures, always as a separate, labelled trace
("published reference, not measured here") with the source, never merged into measured data.

Per-position acceptance here has vLLM's meaning (as in specviz.metrics): position j is the share of
drafted steps that accepted more than j drafts, so the vector is cumulative and falls with j.
"""

from __future__ import annotations

from pydantic import Field

from .base import Frozen


class Source(Frozen):
    title: str
    publisher: str
    date: str | None = Field(None, description="publication date, ISO format, when known")
    url: str | None = Field(None, description="only a URL that was checked; None rather than a guess")

    def citation(self) -> str:
        parts = [f"{self.publisher}, \u201c{self.title}\u201d"]
        if self.date:
            parts.append(self.date)
        return ", ".join(parts)


class Reference(Frozen):
    """One published figure (or set of figures) and the conditions it was measured under."""

    key: str
    label: str = Field(description="short name for a legend")
    source: Source
    method: str
    target_model: str
    draft_model: str | None = None
    num_speculative_tokens: int | None = None
    benchmark: str
    hardware: str
    mean_acceptance_length: float | None = None
    mean_acceptance_length_by_domain: dict[str, float] = Field(default_factory=dict)
    acceptance_rate_per_pos: list[float] = Field(default_factory=list)
    speedup_range: tuple[float, float] | None = Field(None, description="output throughput vs no speculation")
    notes: str = ""

    def legend_name(self) -> str:
        return f"published reference, not measured here: {self.label}"


VLLM_BLOG_EAGLE3_AMD = Source(
    title="EAGLE3 Speculative Decoding on AMD Instinct GPUs: Training and Serving with vLLM and AMD Quark",
    publisher="vLLM blog",
    date="2026-07-13",
    url="https://vllm.ai/blog/2026-07-13-eagle-3-amd-instinct",
)

VLLM_SPEC_DECODE_EXAMPLE = Source(
    title="examples/offline_inference/spec_decode.py (its --test check)",
    publisher="vLLM repository",
    url="https://github.com/vllm-project/vllm/blob/eb987dffa144e73e064c00de74f60f54da54ff99/"
        "examples/offline_inference/spec_decode.py",
)

MINIMAX_M3_EAGLE3_SPEED_BENCH = Reference(
    key="minimax-m3-eagle3-speed-bench",
    label="MiniMax-M3 EAGLE-3, SPEED-Bench, k=3",
    source=VLLM_BLOG_EAGLE3_AMD,
    method="eagle3",
    target_model="amd/MiniMax-M3-MXFP4",
    draft_model="amd/MiniMax-M3-EAGLE3.1",
    num_speculative_tokens=3,
    benchmark="SPEED-Bench (11 domains)",
    hardware="AMD Instinct GPUs, ROCm/vLLM (the post names MI355X for its throughput results)",
    mean_acceptance_length=2.80,
    mean_acceptance_length_by_domain={
        "coding": 3.32, "math": 3.14, "RAG": 3.12, "multilingual": 3.04, "reasoning": 2.89, "STEM": 2.86,
        "summarization": 2.86, "humanities": 2.71, "QA": 2.55, "writing": 2.33, "roleplay": 2.01,
    },
    acceptance_rate_per_pos=[0.76, 0.56, 0.43],
    notes="'about 76%, 56%, and 43%' (cumulative) for draft positions 1-3 at three speculative tokens.",
)

KIMI_K25_EAGLE3_MI355X = Reference(
    key="kimi-k2.5-eagle3-mi355x",
    label="Kimi-K2.5 EAGLE-3 on MI355X",
    source=VLLM_BLOG_EAGLE3_AMD,
    method="eagle3",
    target_model="amd/Kimi-K2.5-MXFP4",
    draft_model="lightseekorg/kimi-k2.5-eagle3 (BF16), amd/kimi-k2.5-eagle3-fp8 (FP8)",
    benchmark="InferenceX, random prompts, 1K in / 1K out",
    hardware="AMD Instinct MI355X, TP=4",
    speedup_range=(1.69, 2.00),
    notes="BF16 draft 1.69-1.90x, FP8 draft 1.76-2.00x; largest at low concurrency.",
)

MINIMAX_M25_EAGLE3_MI355X = Reference(
    key="minimax-m2.5-eagle3-mi355x",
    label="MiniMax-M2.5 EAGLE-3 on MI355X",
    source=VLLM_BLOG_EAGLE3_AMD,
    method="eagle3",
    target_model="MiniMaxAI/MiniMax-M2.5",
    draft_model="thoughtworks/MiniMax-M2.5-Eagle3",
    num_speculative_tokens=3,
    benchmark="InferenceX, random prompts, 1K in / 1K out",
    hardware="AMD Instinct MI355X, TP=4 with expert parallelism",
    speedup_range=(1.38, 1.79),
    notes="Largest relative gain at low concurrency.",
)

LLAMA31_8B_EAGLE_MT_BENCH = Reference(
    key="llama3.1-8b-eagle-mt-bench",
    label="Llama-3.1-8B-Instruct EAGLE, MT-Bench, k=3",
    source=VLLM_SPEC_DECODE_EXAMPLE,
    method="eagle",
    target_model="meta-llama/Llama-3.1-8B-Instruct",
    draft_model="yuhuili/EAGLE-LLaMA3.1-Instruct-8B",
    num_speculative_tokens=3,
    benchmark="MT-Bench (philschmid/mt-bench), 80 prompts, temperature 0",
    hardware="1x H100 (the check's comment: 'takes ~30s to run on 1xH100')",
    mean_acceptance_length=2.296,
    notes="The example asserts acceptance length within 2% of this value.",
)

LLAMA31_8B_EAGLE3_MT_BENCH = Reference(
    key="llama3.1-8b-eagle3-mt-bench",
    label="Llama-3.1-8B-Instruct EAGLE-3, MT-Bench, k=3",
    source=VLLM_SPEC_DECODE_EXAMPLE,
    method="eagle3",
    target_model="meta-llama/Llama-3.1-8B-Instruct",
    draft_model="yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
    num_speculative_tokens=3,
    benchmark="MT-Bench (philschmid/mt-bench), 80 prompts, temperature 0",
    hardware="1x H100 (the check's comment: 'takes ~30s to run on 1xH100')",
    mean_acceptance_length=2.811,
    notes="The example asserts acceptance length within 2% of this value.",
)

REFERENCES: dict[str, Reference] = {r.key: r for r in (
    MINIMAX_M3_EAGLE3_SPEED_BENCH, KIMI_K25_EAGLE3_MI355X, MINIMAX_M25_EAGLE3_MI355X,
    LLAMA31_8B_EAGLE_MT_BENCH, LLAMA31_8B_EAGLE3_MT_BENCH,
)}

