"""The tracer: a vLLM V1 scheduler that records every verification step.

Load it with vLLM's own option, in the server or offline:

    python -m vllm.entrypoints.openai.api_server --model M \\
        --speculative-config '{"method": "ngram", "num_speculative_tokens": 3}' \\
        --scheduler-cls specviz.tracer.TracingScheduler --no-async-scheduling

It runs inside the EngineCore process (a child of the server), so records leave through an
append-only JSON-lines file named by the environment variable SPECVIZ_TRACE_FILE: one line per
engine step that produced tokens, flushed at once, so a server that dies keeps what it wrote.

    {"step": 12, "t": 1764600000.1,
     "reqs": [["cmpl-ab12-0-1f2e3d4c", [11, 12, 13], [11, 99], [11, 99]], ...]}

Each entry of "reqs" is [engine request id, draft token ids, sampled token ids, committed token
ids]: drafts are `scheduler_output.scheduled_spec_decode_tokens[req_id]`, sampled is
`model_runner_output.sampled_token_ids[index]` (accepted drafts then one correction or bonus
token) copied before vLLM trims it at a stop, and committed is what the request's output grew by.

Under async scheduling the scheduler only sees placeholder drafts (-1); the tracer refuses to
start there rather than record garbage.
"""

from __future__ import annotations

import json
import os
import time

from vllm.logger import init_logger
from vllm.v1.core.sched.scheduler import Scheduler

from .trace import TRACE_FILE_ENV

logger = init_logger(__name__)

PLACEHOLDER_TOKEN_ID = -1


class TracerError(RuntimeError):
    pass


def check_can_trace(vllm_config) -> None:
    """Refuse async scheduling with speculative decoding: the drafts would all be placeholders."""
    if vllm_config.scheduler_config.async_scheduling and vllm_config.speculative_config is not None:
        raise TracerError(
            "specviz tracer: async scheduling is on, so the scheduler only sees placeholder "
            "drafts (-1) and cannot record them. Restart vLLM with --no-async-scheduling "
            "(or async_scheduling=False) to trace speculative decoding."
        )


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
        self._trace_file = open(path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 (lives with the engine)
        self._engine_step = 0
        logger.info("specviz tracer writing step records to %s", path)

    def update_from_output(self, scheduler_output, model_runner_output):
        sampled_all = model_runner_output.sampled_token_ids
        spec_tokens = scheduler_output.scheduled_spec_decode_tokens
        index_of = model_runner_output.req_id_to_index
        pending = []  # (req_id, request, outputs before, drafts, sampled copy)
        if sampled_all:
            for req_id in scheduler_output.num_scheduled_tokens:
                request = self.requests.get(req_id)
                index = index_of.get(req_id)
                if request is None or index is None or request.is_finished():
                    continue
                sampled = sampled_all[index]
                if not sampled:  # a prefill chunk that did not reach the end of the prompt
                    continue
                pending.append(
                    (req_id, request, request.num_output_tokens, list(spec_tokens.get(req_id, ())), list(sampled))
                )

        outputs = super().update_from_output(scheduler_output, model_runner_output)

        self._engine_step += 1
        if pending:
            reqs = []
            for req_id, request, before, drafts, sampled in pending:
                if PLACEHOLDER_TOKEN_ID in drafts:
                    logger.error("specviz tracer: placeholder drafts for %s; not recorded", req_id)
                    continue
                reqs.append([req_id, drafts, sampled, request.output_token_ids[before:]])
            line = json.dumps({"step": self._engine_step, "t": time.time(), "reqs": reqs}, separators=(",", ":"))
            self._trace_file.write(line + "\n")
        return outputs

    def shutdown(self) -> None:
        try:
            self._trace_file.close()
        finally:
            super().shutdown()
