"""The tracer: a vLLM V1 scheduler that records every verification step.

Load it with vLLM's own option, in the server or offline:

    python -m vllm.entrypoints.openai.api_server --model M \\
        --speculative-config '{"method": "ngram", "num_speculative_tokens": 3}' \\
        --scheduler-cls specviz.serving.tracer.TracingScheduler --no-async-scheduling

It runs inside the EngineCore process (a child of the server), so records leave through an
append-only JSON-lines file named by the environment variable SPECVIZ_TRACE_FILE: one line per
engine step that produced tokens.

    {"step": 12, "t": 1764600000.1,
     "reqs": [["cmpl-ab12-0-1f2e3d4c", [11, 12, 13], [11, 99], 2, 0], ...]}

Each entry of "reqs" is [engine request id, draft token ids, sampled token ids, committed, padded
slots]: drafts are the real drafts in `scheduler_output.scheduled_spec_decode_tokens[req_id]`, sampled
is `model_runner_output.sampled_token_ids[index]` (accepted drafts then one correction or bonus token)
as it was before vLLM trimmed it at a stop, and committed is how many of the sampled tokens joined the
request's output (they are always its first ones). Earlier tracers wrote committed as the
token ids themselves (and before that, four fields); serving.trace_reader reads all three.

Padded slots are placeholder drafts (-1) that no drafter proposed. vLLM's scheduler pads a request
that joins the batch with exactly one token left to compute (a prompt whose prefix is cached up to
one token past a block boundary, or a resumed request) to 1 + k tokens (`pad_spec_decode`), and
then counts those k slots as drafted and rejected in its own counters. The tracer records how many
there were, so outputs still rebuild and totals still reconcile with vLLM's counters. Placeholders
that vLLM puts in place of grammar-invalid drafts are not counted by vLLM, and not here either.

    a request admitted with 769 prompt tokens, 768 of them cached, at k=4:
    ["cmpl-ab12-0-1f2e", [], [13], 1, 4]      one token, 4 padded slots vLLM counts as rejected

The scheduler never waits on the disk. In `update_from_output` the tracer only takes what vLLM is
about to change (each request's output length and sampled length and last sampled token), as a few
C-level `map`s over the batch, and queues them with references to the step's own outputs; a writer
thread in the same process builds and writes the line. Its queue is bounded (SPECVIZ_TRACE_QUEUE_STEPS
steps): when the writer falls behind, whole steps are dropped and counted, and the file says so in a
line of its own that the reader counts:

    {"dropped_steps": 3, "first_step": 118, "last_step": 120}

On shutdown (and at interpreter exit) the writer drains its queue for at most FLUSH_TIMEOUT_S seconds;
a process killed outright loses only the steps still queued, and the file keeps what reached it.

Under async scheduling or vLLM's V2 model runner the scheduler only sees placeholder drafts; the
tracer refuses to start there rather than record nothing. Writing is bounded: past
SPECVIZ_TRACE_MAX_MB megabytes the file is rotated to "<file>.1" (one old file kept), which
`serving.trace_reader.TraceReader` follows.
"""

from __future__ import annotations

import atexit
import json
import operator
import os
import queue
import threading
import time

from vllm.logger import init_logger
from vllm.v1.core.sched.scheduler import Scheduler

from ..base import SpecvizError
from .trace_reader import DROPPED_STEPS_KEY, TRACE_FILE_ENV, TRACE_MAX_MB_ENV, TRACE_QUEUE_STEPS_ENV

logger = init_logger(__name__)

PLACEHOLDER_TOKEN_ID = -1
DEFAULT_TRACE_MAX_MB = 512.0  # about 30 minutes at 64 concurrent requests on a fast GPU
DEFAULT_TRACE_QUEUE_STEPS = 256  # 2.5 s of 10 ms steps the writer may fall behind before steps are dropped
FLUSH_TIMEOUT_S = 5.0  # how long shutdown (or exit) waits for the writer to drain its queue
IDLE_CHECK_S = 0.2  # an idle writer looks this often for drops that no later step announced

_OUTPUT_LIST = operator.attrgetter("_output_token_ids")  # vLLM's Request appends its output to this list
_LAST = operator.itemgetter(-1)
_STOP = object()  # tells the writer to drain and close


class TracerError(SpecvizError, RuntimeError):
    pass


def trace_queue_steps() -> int:
    """How many steps the writer may hold before new ones are dropped, from SPECVIZ_TRACE_QUEUE_STEPS (default 256)."""
    raw = os.environ.get(TRACE_QUEUE_STEPS_ENV, "")
    try:
        steps = int(raw) if raw else DEFAULT_TRACE_QUEUE_STEPS
    except ValueError:
        raise TracerError(f"specviz tracer: {TRACE_QUEUE_STEPS_ENV}={raw!r} is not a whole number of steps") from None
    if steps < 1:
        raise TracerError(f"specviz tracer: {TRACE_QUEUE_STEPS_ENV} must be >= 1, got {raw!r}")
    return steps


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


def capture_before(requests: dict, scheduler_output, model_runner_output):
    """What vLLM's update is about to change, read without a per-request Python loop; None if nothing sampled.

    (request ids, their output lists, output lengths, sampled lengths, last sampled tokens): vLLM appends to
    each output list and trims a stopping request's sampled list in place, so the lengths and last tokens are
    taken now, and `record_entries` rebuilds the rest from the step's own outputs later.
    """
    sampled_all = model_runner_output.sampled_token_ids
    if sampled_all is None or len(sampled_all) == 0:
        return None
    req_ids = [*scheduler_output.num_scheduled_tokens]
    try:
        outputs = [*map(_OUTPUT_LIST, map(requests.__getitem__, req_ids))]
    except (KeyError, AttributeError):  # a request aborted during the step (vLLM skips it), or another Request
        req_ids = [rid for rid in req_ids if rid in requests]
        outputs = [_output_list(requests[rid]) for rid in req_ids]
    try:
        lasts = [*map(_LAST, sampled_all)]
    except IndexError:  # a request in the middle of its prefill sampled nothing
        lasts = [s[-1] if len(s) else PLACEHOLDER_TOKEN_ID for s in sampled_all]
    return req_ids, outputs, [*map(len, outputs)], [*map(len, sampled_all)], lasts


def _output_list(request):
    try:
        return request._output_token_ids
    except AttributeError:
        return request.output_token_ids


def record_entries(captured, output_lengths_after: list[int], scheduler_output, model_runner_output) -> list[list]:
    """The "reqs" of one step's line: [request id, drafts, sampled, committed, padded] per request whose output grew.

    A request vLLM skipped (finished or aborted before the update, stale output it drops) or that sampled
    nothing (a prefill chunk) did not grow, and is left out as vLLM leaves it out. A stopped request's sampled
    list was trimmed to what it committed; the rest were accepted drafts and the last token taken before:
        drafts [5, 6, 7], sampled [5, 6, 9] trimmed to [5] at a stop -> [5] + drafts[1:2] + [9] = [5, 6, 9]
    """
    req_ids, _outputs, before, sampled_lengths, lasts = captured
    sampled_all = model_runner_output.sampled_token_ids
    index_of = model_runner_output.req_id_to_index
    spec_tokens = scheduler_output.scheduled_spec_decode_tokens
    invalid = getattr(scheduler_output, "num_invalid_spec_tokens", None) or {}
    entries = []
    for req_id, n_before, n_after in zip(req_ids, before, output_lengths_after):
        committed = n_after - n_before
        if committed <= 0:
            continue
        index = index_of[req_id]
        sampled = sampled_all[index]
        if type(sampled) is not list:
            sampled = [*map(int, sampled)]
        scheduled = spec_tokens.get(req_id)
        drafts, padded = split_drafts(scheduled, invalid.get(req_id, 0)) if scheduled is not None else ([], 0)
        if len(sampled) < sampled_lengths[index]:  # trimmed at a stop
            sampled = sampled + drafts[len(sampled):sampled_lengths[index] - 1] + [int(lasts[index])]
        entries.append([req_id, drafts, sampled, committed, padded])
    return entries


class TraceWriter:
    """Writes queued steps to the trace file on a thread of its own; whole steps are dropped (and counted) when
    it falls `max_steps` behind, so the scheduler's `put` never waits.

    The file is opened unbuffered and written once per step: each write is a system call that hands the GIL
    back, so a scheduler thread waiting for it waits at most one step's encoding, and a killed process keeps
    every line written.
    """

    def __init__(self, path: str, max_bytes: int, max_steps: int, encode) -> None:
        self.path, self.max_bytes, self.max_steps, self._encode = path, max_bytes, max_steps, encode
        self._file = open(path, "ab", buffering=0)
        self._written = self._file.tell()
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._drops_lock = threading.Lock()
        self._pending_drops: list[int] = []  # engine steps dropped and not yet announced in the file
        self.num_dropped = 0  # steps dropped since start
        self.num_written = 0  # steps written since start
        self.cpu_s = 0.0  # the writer thread's own CPU time
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="specviz-trace-writer", daemon=True)
        self._thread.start()

    def put(self, step: int, item) -> bool:
        """Queue one step for writing; False (and the step counted as dropped) when the writer is full behind."""
        if self._queue.qsize() >= self.max_steps or self._closed:
            with self._drops_lock:
                self._pending_drops.append(step)
                self.num_dropped += 1
            return False
        self._queue.put(item)
        return True

    def close(self, timeout_s: float = FLUSH_TIMEOUT_S) -> None:
        """Drain what is queued (at most `timeout_s`), announce pending drops and close; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        self._queue.put(_STOP)
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            logger.warning("specviz tracer: the trace writer did not drain within %.0f s; %d queued step(s) "
                           "are not in %s", timeout_s, self._queue.qsize(), self.path)

    def _run(self) -> None:
        cpu_start = time.thread_time()
        try:
            while True:
                try:
                    item = self._queue.get(timeout=IDLE_CHECK_S)
                except queue.Empty:
                    self._announce_drops()
                    continue
                if item is _STOP:
                    break
                self._announce_drops()
                line = self._encode(item)
                if line is not None:
                    self._write(line)
                self.num_written += 1
                self.cpu_s = time.thread_time() - cpu_start
            self._announce_drops()
        except Exception:  # a broken writer must not take the engine down with it: say so, keep serving
            logger.exception("specviz tracer: the trace writer stopped; steps from here on are not recorded")
        finally:
            self._file.close()
            self.cpu_s = time.thread_time() - cpu_start

    def _announce_drops(self) -> None:
        if not self._pending_drops:
            return
        with self._drops_lock:
            steps, self._pending_drops = self._pending_drops, []
        self._write(json.dumps({DROPPED_STEPS_KEY: len(steps), "first_step": steps[0], "last_step": steps[-1]},
                               separators=(",", ":")).encode())

    def _write(self, line: bytes) -> None:
        if self._written + len(line) + 1 > self.max_bytes and self._written > 0:
            self._file.close()
            os.replace(self.path, self.path + ".1")
            self._file = open(self.path, "ab", buffering=0)
            self._written = 0
        self._file.write(line + b"\n")
        self._written += len(line) + 1


def encode_step(item) -> bytes | None:
    """One queued step as its JSON line (None when no request's output grew)."""
    step, t, captured, after, scheduler_output, model_runner_output = item
    reqs = record_entries(captured, after, scheduler_output, model_runner_output)
    if not reqs:
        return None
    return json.dumps({"step": step, "t": t, "reqs": reqs}, separators=(",", ":")).encode()


class TracingScheduler(Scheduler):
    """vLLM's V1 Scheduler plus one JSON line per engine step, written off the scheduler's path (module docstring)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        check_can_trace(self.vllm_config)
        path = os.environ.get(TRACE_FILE_ENV)
        if not path:
            raise TracerError(
                f"specviz tracer: set {TRACE_FILE_ENV} to the file that should receive step records"
            )
        self._engine_step = 0
        self._writer = TraceWriter(path, trace_max_bytes(), trace_queue_steps(), encode_step)
        atexit.register(self._writer.close)  # an exit without shutdown() still drains the queue
        logger.info("specviz tracer writing step records to %s (rotated past %d MB, at most %d steps queued)", path,
                    self._writer.max_bytes // (1024 * 1024), self._writer.max_steps)

    def update_from_output(self, scheduler_output, model_runner_output):
        captured = capture_before(self.requests, scheduler_output, model_runner_output)
        outputs = super().update_from_output(scheduler_output, model_runner_output)
        self._engine_step += 1
        if captured is not None:
            # The step's outputs are not changed after this call (vLLM 0.32: the scheduler output's draft lists
            # were detached from the requests when it was built), so the writer reads them later.
            self._writer.put(self._engine_step, (self._engine_step, time.time(), captured,
                                                 [*map(len, captured[1])], scheduler_output, model_runner_output))
        return outputs

    def shutdown(self) -> None:
        try:
            self._writer.close()
        finally:
            super().shutdown()
