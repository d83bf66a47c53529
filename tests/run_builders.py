"""Hand-built runs for tests: steps, runs and a batch-size schedule written out token by token, and the fake
server and stream results a recording is built from (serving.recording.build_run)."""

from __future__ import annotations

from specviz.config import SpecConfig
from specviz.runfile import Request, Run, RunMeta, Step
from specviz.serving.server import Provenance
from specviz.serving.stream import StreamResult

# What vLLM answers a request once its EngineCore has died
ENGINE_DEAD = ('HTTP 500: {"error":{"message":"EngineCore encountered an issue. See stack trace (above) for the '
               'root cause.","type":"InternalServerError","param":null,"code":500}}')


def make_step(i: int, drafts: list[int], sampled: list[int], committed: list[int] | None = None) -> Step:
    return Step(
        engine_step=i, time_s=1000.0 + i, draft_token_ids=drafts, sampled_token_ids=sampled,
        committed_token_ids=sampled if committed is None else committed,
        num_accepted=len(sampled) - 1 if drafts else 0,
    )


def make_run(requests: list[Request], *, k: int | None = 3, **meta) -> Run:
    fields = dict(
        run_id="test", created_at="2026-12-02T00:00:00+00:00", specviz_version="0", vllm_version="0.32.0",
        platform="cpu", device_name="test cpu", async_scheduling=False, traced=True, target_model="tiny",
        spec=SpecConfig(method="ngram", num_speculative_tokens=k) if k else None, sampling={"temperature": 0.0},
        prompt_set="unit", concurrency=1, max_tokens=16,
    ) | meta
    return Run(meta=RunMeta(**fields), requests=requests)


SCHEDULE = SpecConfig.from_recorded({"method": "ngram", "num_speculative_tokens": 4,
                                     "num_speculative_tokens_per_batch_size": [[1, 1, 4], [2, 64, 1]]})


def make_scheduled_run(r1_drafts_at_step_4: int = 1) -> Run:
    """A run whose k follows the batch size (SCHEDULE: k=4 alone, k=1 beside others).

    r0 at engine steps 1-6, r1 joins at 3 and leaves after 4: the batch goes 1, 1, 2, 2, 1, 1.
    Drafts verified at a step were proposed at the request's step before, with that step's batch:
    r0 verifies 4, 4 (proposed alone), 1, 1 (proposed beside r1), 4 (alone again); r1 verifies 1.
    """
    def step(i, n):  # n drafts, all accepted, then the bonus token
        drafts = list(range(10 * i, 10 * i + n))
        return make_step(i, drafts, drafts + [99])
    r0 = [make_step(1, [], [5]), step(2, 4), step(3, 4), step(4, 1), step(5, 1), step(6, 4)]
    r1 = [make_step(3, [], [6]), step(4, r1_drafts_at_step_4)]
    reqs = [Request(request_id=rid, prompt="p", output_token_ids=[t for s in steps for t in s.committed_token_ids],
                    output_text="x", start_time_s=0.0, finish_reason="length", steps=steps)
            for rid, steps in (("r0", r0), ("r1", r1))]
    return make_run(reqs, k=4, spec=SCHEDULE, concurrency=2)



class FakeServer:
    """What build_run reads from a server: its model, whether it traces, its spec and its provenance."""

    model, trace = "tiny", True
    spec = SpecConfig(method="ngram", num_speculative_tokens=3)

    def provenance(self):
        return Provenance(platform="cpu", device_name="test", vllm_version="0.32.0", async_scheduling=False)


def stream_result(rid: str, tokens: list[int], error: str | None = None) -> StreamResult:
    """One request as the stream delivered it: `tokens` and a length stop, or `error` and no end."""
    return StreamResult(request_id=rid, prompt="p", start_time_s=0.0, token_ids=tokens, text="x" * len(tokens),
                        end_time_s=None if error else 1.0, finish_reason=None if error else "length", error=error)
