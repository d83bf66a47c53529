"""Record a run: send the prompts, join the tracer's steps to the streams, and build the Run.

    run = record(server, prompts, prompt_set="chat", concurrency=4, max_tokens=128)

`server` is any serving.Server. The Run carries this machine's provenance and vLLM's counters
(after minus before), so every run is cross-checked against vLLM's own numbers.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import asdict
from datetime import datetime, timezone

import httpx
from pydantic import ValidationError

from .. import __version__
from ..config import DEFAULT_LOGPROBS
from ..runfile import LENIENT, RequestSpecDecodeMetrics, Run, RunMeta, SpecDecodeCounters, Step, first_error
from .counters import counters_delta, scrape_members_counters
from .engine_log import died_reason, engine_gone, failed_on_the_server
from .server import EngineError, Server
from .stream import CANCELLED, StreamResult, stream_completion
from .trace_reader import (
    TraceReader,
    _steps_within,
    client_request_id,
    committed_count,
    placeholder_only_reason,
    steps_by_request,
)

# Sent before measuring to start the engine's lazy work; not a prompt of any set, so the measured
# requests do not find their own prompts in vLLM's prefix cache.
WARMUP_PROMPT = "Warm-up request: name three colours."
TRACE_CATCH_UP_S = 10.0  # the longest the recorder waits for the tracer's writer to write a run's last steps
TRACE_QUIET_S = 1.0  # with drops counted, a trace that has not grown for this long is taken as complete


def warmup_prompts(n: int) -> list[str]:
    """n distinct warm-up prompts, none of them in any prompt set: 'Warm-up request: ... (request 2 of 4)'."""
    return [f"{WARMUP_PROMPT} (request {i + 1} of {n})" for i in range(n)]




def sampling_params(*, max_tokens: int, temperature: float = 0.0, seed: int = 0,
                    logprobs: int = DEFAULT_LOGPROBS) -> dict:
    """What every request of a run sends (and the run records): the sampling and, unless 0, top-n logprobs.

    sampling_params(max_tokens=64) -> {"max_tokens": 64, "temperature": 0.0, "top_p": 1.0, "seed": 0,
                                       "logprobs": 2, "return_tokens_as_token_ids": True}
    Tokens come back as ids ("token_id:1734"): two different tokens can decode to the same text.
    """
    sampling = {"max_tokens": max_tokens, "temperature": temperature, "top_p": 1.0, "seed": seed}
    if logprobs:
        sampling |= {"logprobs": logprobs, "return_tokens_as_token_ids": True}
    return sampling


def load_tokenizer(model: str):
    from transformers import AutoTokenizer

    from ..mimo import tokenizer_for

    return AutoTokenizer.from_pretrained(tokenizer_for(model))  # a MiMo form's own tokenizer folder


def apply_chat_template(tokenizer, prompt: str) -> str:
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                             add_generation_prompt=True)
    return prompt


def record(
    server: Server,
    prompts: list[str],
    *,
    prompt_set: str,
    concurrency: int,
    max_tokens: int,
    temperature: float = 0.0,
    seed: int = 0,
    logprobs: int = DEFAULT_LOGPROBS,
    tokenizer=None,
    chat: bool = True,
    warmup: bool = True,
    on_request_done: Callable[[StreamResult], None] | None = None,
    keep_interrupted: bool = False,
) -> Run:
    """Send every prompt (at most `concurrency` in flight), join the tracer's steps, return the Run.

    `server` is one specviz started (LocalServer) or one it attached to (serving.attached). Nothing
    measured is thrown away:
    - a request the server refuses (a prompt longer than the context: HTTP 400) is kept with its
      error, and the others go on;
    - if the engine dies part-way, no more requests are sent: the Run holds what arrived, with
      complete=False, the reason, and the engine's own error from its log (meta.engine_error);
    - if the recording breaks the run's invariants, the Run keeps its steps unchecked, the tracer's
      raw records, and meta.invalid_reason.

    The warm-up sends WARMUP_PROMPT, not a prompt of the set, so no measured request finds its
    own prompt in vLLM's prefix cache. `logprobs` (top n per output token, 0 for none) is what lets a
    comparison with another run explain where their outputs part (specviz.divergence).

    - a Ctrl-C (KeyboardInterrupt) stops sending and cuts the requests in flight at their next chunk;
      with keep_interrupted the Run so far is returned, complete=False, its reason starting with
      INTERRUPTED ('interrupted (Ctrl-C) after 2 of 8 requests finished; ...'); without, the
      KeyboardInterrupt goes on once they stopped (a sweep drops the cell in flight).

    Raises EngineError before measuring when the warm-up's trace holds only placeholder drafts
    (the server's scheduler cannot see drafts: see placeholder_only_reason), or when the engine
    died on the warm-up request (the message carries the engine's error).
    """
    tokenizer = tokenizer or server.tokenizer()
    texts = [apply_chat_template(tokenizer, p) if chat else p for p in prompts]
    sampling = sampling_params(max_tokens=max_tokens, temperature=temperature, seed=seed, logprobs=logprobs)
    run_id = uuid.uuid4().hex[:12]
    request_ids = [f"{run_id}-{i}" for i in range(len(texts))]
    members = server.members()  # one server, or several behind one workflow (requests go round-robin)
    readers = [TraceReader(m.trace_path, from_end=True) for m in members if m.trace]
    lock = threading.Lock()

    with httpx.Client(timeout=httpx.Timeout(None, connect=10.0),
                      limits=httpx.Limits(max_connections=concurrency + 2)) as client:
        if warmup:
            warmup_text = apply_chat_template(tokenizer, WARMUP_PROMPT) if chat else WARMUP_PROMPT
            for j, m in enumerate(members):
                res = stream_completion(client, m.url, m.model, warmup_text, f"warmup-{run_id}-{j}",
                                        sampling | {"max_tokens": min(8, max_tokens)})
                if engine_gone(res.error):
                    cause = _engine_error(server)
                    raise EngineError("the engine died on the warm-up request, before any measured request was "
                                      "sent; nothing was recorded. "
                                      + (f"Its error:\n{cause}" if cause else f"The request's error: {res.error}"))
        warmup_records = [rec for reader in readers for rec in reader.read_new()]
        if server.spec is not None and (why := placeholder_only_reason(warmup_records)):
            raise EngineError(f"cannot trace this server: {why}")
        dropped_before = sum(reader.num_dropped_steps for reader in readers)
        before = scrape_members_counters(members)

        gone = threading.Event()  # a request's error said the engine is gone: send no more
        interrupted = threading.Event()  # Ctrl-C: send no more, and cut the streams in flight

        def one(i: int) -> StreamResult | None:
            if gone.is_set() or interrupted.is_set():
                return None
            m = members[i % len(members)]
            res = stream_completion(client, m.url, m.model, texts[i], request_ids[i], sampling,
                                    cancelled=interrupted.is_set)
            if engine_gone(res.error):
                gone.set()
            if on_request_done:
                with lock:
                    on_request_done(res)
            return res

        sent = _send_all(one, len(texts), concurrency, interrupted)  # None: not sent (engine gone, Ctrl-C)
        if interrupted.is_set() and not keep_interrupted:
            raise KeyboardInterrupt
        results = [res for res in sent if res is not None]
        after = scrape_members_counters(members) if server.alive() and not interrupted.is_set() else None

    # The tracer's writer thread writes a step soon after its tokens left the engine: wait for it (a dead server
    # wrote all it ever will).
    every_member_traced = bool(readers) and len(readers) == len(members)  # else some requests have no trace
    records = read_until_traced(readers, results, wait=every_member_traced and server.alive() and not gone.is_set())
    dropped = sum(reader.num_dropped_steps for reader in readers) - dropped_before
    reason = engine_error = None
    errors = [r.error for r in results if r.error]
    if any(failed_on_the_server(e) for e in errors) or gone.is_set() or not server.alive():
        engine_error = _engine_error(server)
    if gone.is_set() or not server.alive():
        reason = died_reason(first_error=errors[0] if errors else None, engine_error=engine_error,
                             num_not_sent=len(texts) - len(results), log_tail=server.log_tail(15))
    elif interrupted.is_set():
        reason = interrupted_reason(results, len(texts))
    invalid = placeholder_only_reason(records) if server.spec is not None else None
    decode = token_decoder(tokenizer)
    try:
        steps = steps_by_request(records, request_ids, decode) if readers else {}
    except ValidationError as e:
        invalid = invalid or f"a tracer record breaks a step's invariants {first_error(e)}"
        steps = steps_by_request(records, request_ids, decode, context=LENIENT)
    return build_run(server, results, steps, run_id=run_id, prompt_set=prompt_set, concurrency=concurrency,
                     max_tokens=max_tokens, sampling=sampling, incomplete_reason=reason, engine_error=engine_error,
                     user_messages=[p for p, res in zip(prompts, sent) if res is not None] if chat else None,
                     counters=counters_delta(before, after) if reason is None else None,
                     invalid_reason=invalid, raw_trace_records=records, decode=decode, trace_dropped_steps=dropped)


def read_until_traced(readers: list[TraceReader], results: list[StreamResult], *, wait: bool = True) -> list[dict]:
    """The tracer's new records, read until they commit every token the client received.

    The tracer writes each step from a thread of its own, shortly after vLLM sent the step's tokens, so the
    last steps of a run may reach the file after its last token reached the client. Waits at most
    TRACE_CATCH_UP_S; when the writer fell behind and dropped steps (counted in the file), those tokens never
    come, and a trace quiet for TRACE_QUIET_S is as complete as it will get.
    """
    records = [rec for reader in readers for rec in reader.read_new()]
    want = {r.request_id: len(r.token_ids) for r in results if r.token_ids}
    got: dict[str, int] = dict.fromkeys(want, 0)

    def count(recs: list[dict]) -> None:
        for rec in recs:
            for entry in rec["reqs"]:
                if (rid := client_request_id(entry[0])) in got:
                    got[rid] += committed_count(entry[3])

    count(records)
    start = quiet_since = time.monotonic()
    while wait and any(got[rid] < n for rid, n in want.items()) and time.monotonic() - start < TRACE_CATCH_UP_S:
        time.sleep(0.02)
        if fresh := [rec for reader in readers for rec in reader.read_new()]:
            count(fresh)
            records += fresh
            quiet_since = time.monotonic()
        elif any(r.num_dropped_steps for r in readers) and time.monotonic() - quiet_since > TRACE_QUIET_S:
            break
    return records


INTERRUPTED = "interrupted"  # the first word of an interrupted run's incomplete_reason


def interrupted_reason(results: list[StreamResult], num_prompts: int) -> str:
    """'interrupted (Ctrl-C) after 2 of 8 requests finished; 2 in flight were cancelled, 4 not sent'."""
    finished = sum(1 for r in results if r.error is None and r.finish_reason is not None)
    cut = sum(1 for r in results if r.error == CANCELLED)
    return (f"{INTERRUPTED} (Ctrl-C) after {finished} of {num_prompts} requests finished; {cut} in flight "
            f"{'was' if cut == 1 else 'were'} cancelled, {num_prompts - len(results)} not sent")


def _send_all(one: Callable[[int], StreamResult | None], n: int, concurrency: int,
              interrupted: threading.Event) -> list[StreamResult | None]:
    """one(i) for i < n, at most `concurrency` at a time; their results in order.

    A first Ctrl-C (KeyboardInterrupt in this thread) sets `interrupted`: requests not yet sent are not
    sent, those in flight stop at their next chunk (one engine step, or the prefill for one that has none
    yet), and what they had is kept. A second Ctrl-C while they wind down goes on up, at once.
    """
    pool = ThreadPoolExecutor(max_workers=concurrency)
    futures = [pool.submit(one, i) for i in range(n)]
    try:
        wait(futures)
    except KeyboardInterrupt:
        interrupted.set()
        try:
            wait(futures)
        except KeyboardInterrupt:
            pool.shutdown(wait=False, cancel_futures=True)
            raise
    pool.shutdown()
    return [f.result() for f in futures]


def build_run(
    server: Server, results: list[StreamResult], steps: dict[str, list[Step]], *, run_id: str,
    prompt_set: str, concurrency: int, max_tokens: int, sampling: dict, incomplete_reason: str | None = None,
    counters: SpecDecodeCounters | None = None, user_messages: list[str | None] | None = None,
    invalid_reason: str | None = None, raw_trace_records: list[dict] | None = None, engine_error: str | None = None,
    decode: Callable[[int], str] | None = None, trace_dropped_steps: int = 0,
) -> Run:
    """Assemble a Run from what the client saw and the tracer's steps, with this machine's provenance.

    `user_messages[i]` is the text the chat template wrapped into results[i].prompt (None if none was used).
    Without the tracer, `decode` (token id -> text) gives each output token its text for the step view.
    A Run that breaks its invariants (or arrives with `invalid_reason`) is still returned, marked
    invalid with the violation and carrying `raw_trace_records`, so it can be saved and inspected.
    When the tracer dropped steps (`trace_dropped_steps`) or the run ended with the engine, a request's
    steps may commit fewer tokens than it received: the rest are counted as its num_untraced_tokens.
    Otherwise such a request breaks the run's invariants (a step was lost without being counted).
    """
    requests = []
    for res, user_message in zip(results, user_messages or [None] * len(results)):
        req_steps = steps.get(res.request_id, []) if server.trace else []
        if res.finish_reason is None:  # cut off: keep the steps whose tokens reached the client
            req_steps = _steps_within(req_steps, len(res.token_ids))
        untraced = 0
        if server.trace and (trace_dropped_steps or incomplete_reason):
            untraced = max(len(res.token_ids) - sum(len(s.committed_token_ids) for s in req_steps), 0)
        requests.append(dict(
            request_id=res.request_id, prompt=res.prompt, user_message=user_message,
            prompt_token_ids=res.prompt_token_ids,
            output_token_ids=res.token_ids, output_text=res.text, start_time_s=res.start_time_s,
            output_token_texts=[decode(t) for t in res.token_ids] if decode and not server.trace else [],
            first_token_time_s=res.first_token_time_s, end_time_s=res.end_time_s,
            finish_reason=res.finish_reason, error=res.error, steps=req_steps, stream_chunks=res.chunks,
            num_untraced_tokens=untraced,
            spec_decode_metrics=_spec_decode_metrics(res.spec_decode_metrics),
            top_logprobs=res.top_logprobs,
        ))
    meta = RunMeta(
        run_id=run_id,
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        specviz_version=__version__,
        **asdict(server.provenance()),  # every Provenance field is a RunMeta field of the same name
        traced=server.trace,
        target_model=server.model,
        spec=server.spec,
        sampling=sampling,
        prompt_set=prompt_set,
        concurrency=concurrency,
        max_tokens=max_tokens,
        complete=incomplete_reason is None,
        incomplete_reason=incomplete_reason,
        engine_error=engine_error,
        vllm_counters=counters,
        trace_dropped_steps=trace_dropped_steps,
    )
    if invalid_reason is None:
        try:
            return Run.model_validate({"meta": meta, "requests": requests})
        except ValidationError as e:
            invalid_reason = f"the recording breaks an invariant {first_error(e)}"
    return Run.model_validate({"meta": meta.model_copy(update={"invalid_reason": invalid_reason}),
                               "requests": requests, "raw_trace_records": raw_trace_records}, context=LENIENT)


def _spec_decode_metrics(reported: dict | None) -> RequestSpecDecodeMetrics | None:
    """vLLM's per-request figures, keeping the fields this specviz knows (vLLM calls the shape experimental)."""
    if not reported:
        return None
    known = RequestSpecDecodeMetrics.model_fields
    try:
        return RequestSpecDecodeMetrics(**{k: v for k, v in reported.items() if k in known})
    except ValueError:
        return None


def _engine_error(server: Server) -> str | None:
    """The engine's error from its log, waiting a moment for the dying processes' last lines to land."""
    for _ in range(10):
        if cause := server.engine_error():
            return cause
        time.sleep(0.2)
    return None


def token_decoder(tokenizer) -> Callable[[int], str]:
    """tokenizer.decode([id]) with a cache: token texts for display."""
    cache: dict[int, str] = {}

    def decode(token_id: int) -> str:
        if token_id not in cache:
            cache[token_id] = tokenizer.decode([token_id])
        return cache[token_id]

    return decode

