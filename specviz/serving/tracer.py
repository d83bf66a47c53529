"""The tracer: a vLLM V1 scheduler that records every verification step.

Load it with vLLM's own option, in the server or offline:

    python -m vllm.entrypoints.openai.api_server --model M \\
        --speculative-config '{"method": "ngram", "num_speculative_tokens": 3}' \\
        --scheduler-cls specviz.serving.tracer.TracingScheduler --no-async-scheduling

It runs inside the EngineCore process (a child of the server), so records leave through an
append-only JSON-lines file named by the environment variable SPECVIZ_TRACE_FILE: one line per
engine step that produced tokens, flushed at once, so a server that dies keeps what it wrote.

    {"step": 12, "t": 1764600000.1,
     "reqs": [["cmpl-ab12-0-1f2e3d4c", [11, 12, 13], [11, 99], [11, 99]], ...]}

Each entry of "reqs" is [engine request id, draft token ids, sampled token ids, committed token
ids, padded slots]: drafts are the real drafts in `scheduler_output.scheduled_spec_decode_tokens[req_id]`,
sampled is `model_runner_output.sampled_token_ids[index]` (accepted drafts then one correction or bonus
token) copied before vLLM trims it at a stop, and committed is what the request's output grew by.

Padded slots are placeholder drafts (-1) that no drafter proposed. vLLM's scheduler pads a request
that joins the batch with exactly one token left to compute (a prompt whose prefix is cached up to
one token past a block boundary, or a resumed request) to 1 + k tokens (`pad_spec_decode`), and
then counts those k slots as drafted and rejected in its own counters. The tracer records how many
there were, so outputs still rebuild and totals still reconcile with vLLM's counters. Placeholders
that vLLM puts in place of grammar-invalid drafts are not counted by vLLM, and not here either.

    a request admitted with 769 prompt tokens, 768 of them cached, at k=4:
    ["cmpl-ab12-0-1f2e", [], [13], [13], 4]      one token, 4 padded slots vLLM counts as rejected

Under async scheduling or vLLM's V2 model runner the scheduler only sees placeholder drafts; the
tracer refuses to start there rather than record nothing. Writing is bounded: past
SPECVIZ_TRACE_MAX_MB megabytes the file is rotated to "<file>.1" (one old file kept), which
`serving.trace_reader.TraceReader` follows.
"""

from __future__ import annotations

import json
import os
import time

from vllm.logger import init_logger
from vllm.v1.core.sched.scheduler import Scheduler

from ..base import SpecvizError
from .trace_reader import TRACE_FILE_ENV, TRACE_MAX_MB_ENV

logger = init_logger(__name__)

PLACEHOLDER_TOKEN_ID = -1
DEFAULT_TRACE_MAX_MB = 512.0  # about 30 minutes at 64 concurrent requests on a fast GPU


class TracerError(SpecvizError, RuntimeError):
    pass


def check_can_trace(vllm_config) -> None:
    """Refuse configurations in which the scheduler only sees placeholder drafts (-1).

    Async scheduling hides the drafts from the scheduler, and so does vLLM's V2 model runner (on
    GPUs with Triton it is the default from vLLM 0.32, even with --no-async-scheduling).
    """
    if vllm_config.speculative_config is None:
        return  # a baseline has no drafts to hide
    if vllm_config.scheduler_config.async_scheduling:
        raise TracerError(
            "specviz tracer: async scheduling is on, so the scheduler only sees placeholder "
            "drafts (-1) and cannot record them. Restart vLLM with --no-async-scheduling "
            "(or async_scheduling=False) to trace speculative decoding."
        )
    if getattr(vllm_config, "use_v2_model_runner", False):
        raise TracerError(
            "specviz tracer: vLLM's V2 model runner is on, and under it the scheduler only sees "
            "placeholder drafts (-1). Restart vLLM with VLLM_USE_V2_MODEL_RUNNER=0 in its "
            "environment (and --no-async-scheduling) to trace speculative decoding."
        )


def split_drafts(scheduled: list[int], num_invalid: int = 0) -> tuple[list[int], int]:
    """(real drafts, padded slots vLLM counts) of one request's scheduled spec tokens.

    [11, 12, -1, -1] with 1 grammar-invalid slot -> ([11, 12], 1); [-1, -1, -1] -> ([], 3).
    """
    real = [int(t) for t in scheduled if t != PLACEHOLDER_TOKEN_ID]
    placeholders = len(scheduled) - len(real)
    return real, max(placeholders - num_invalid, 0)


def trace_max_bytes() -> int:
    """The size past which the trace file is rotated, from SPECVIZ_TRACE_MAX_MB (default 512)."""
    raw = os.environ.get(TRACE_MAX_MB_ENV, "")
    try:
        mb = float(raw) if raw else DEFAULT_TRACE_MAX_MB
    except ValueError:
        raise TracerError(f"specviz tracer: {TRACE_MAX_MB_ENV}={raw!r} is not a number of megabytes") from None
    if mb <= 0:
        raise TracerError(f"specviz tracer: {TRACE_MAX_MB_ENV} must be > 0, got {raw!r}")
    return int(mb * 1024 * 1024)


class TracingScheduler(Scheduler):
    """vLLM's V1 Scheduler plus one JSON line per engine step (see the module docstring)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        check_can_trace(self.vllm_config)
        path = os.environ.get(TRACE_FILE_ENV)
        if not path:
            raise TracerError(
                f"specviz tracer: set {TRACE_FILE_ENV} to the file that should receive step records"
            )
        self._trace_path = path
        self._max_bytes = trace_max_bytes()
        self._trace_file = open(path, "a", buffering=1, encoding="utf-8")
        self._written = self._trace_file.tell()
        self._engine_step = 0
        logger.info("specviz tracer writing step records to %s (rotated past %d MB)", path,
                    self._max_bytes // (1024 * 1024))

    def update_from_output(self, scheduler_output, model_runner_output):
        pending = self._steps_before_update(scheduler_output, model_runner_output)
        outputs = super().update_from_output(scheduler_output, model_runner_output)
        self._engine_step += 1
        if pending:
            reqs = [[req_id, drafts, sampled, request.output_token_ids[before:], padded]
                    for req_id, request, before, drafts, sampled, padded in pending]
            self._write(json.dumps({"step": self._engine_step, "t": time.time(), "reqs": reqs},
                                   separators=(",", ":")))
        return outputs

    def _steps_before_update(self, scheduler_output, model_runner_output) -> list[tuple]:
        """What each request verified and sampled this step, read before vLLM updates (and trims) it."""
        sampled_all = model_runner_output.sampled_token_ids
        if sampled_all is None or len(sampled_all) == 0:
            return []
        spec_tokens = scheduler_output.scheduled_spec_decode_tokens
        invalid = getattr(scheduler_output, "num_invalid_spec_tokens", None) or {}
        index_of = model_runner_output.req_id_to_index
        pending = []
        for req_id in scheduler_output.num_scheduled_tokens:
            request = self.requests.get(req_id)
            index = index_of.get(req_id)
            if request is None or index is None or request.is_finished():
                continue
            # vLLM drops a preempted request's stale output entirely; so do we.
            if getattr(request, "num_stale_output_tokens", 0) > 0 and getattr(request, "drop_stale_output", False):
                continue
            sampled = sampled_all[index]
            if sampled is None or len(sampled) == 0:  # a prefill chunk that did not reach the end of the prompt
                continue
            drafts, padded = split_drafts(list(spec_tokens.get(req_id, ())), invalid.get(req_id, 0))
            pending.append((req_id, request, request.num_output_tokens, drafts, [int(t) for t in sampled], padded))
        return pending

    def _write(self, line: str) -> None:
        if self._written + len(line) + 1 > self._max_bytes and self._written > 0:
            self._trace_file.close()
            os.replace(self._trace_path, self._trace_path + ".1")
            self._trace_file = open(self._trace_path, "a", buffering=1, encoding="utf-8")
            self._written = 0
        self._trace_file.write(line + "\n")
        self._written += len(line) + 1

    def shutdown(self) -> None:
        try:
            self._trace_file.close()
        finally:
            super().shutdown()
