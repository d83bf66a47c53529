"""Record a run: send the prompts, join the tracer's steps to the streams, and build the Run.

    run = record(server, prompts, prompt_set="chat", concurrency=4, max_tokens=128)

`server` is any serving.Server. The Run carries this machine's provenance and vLLM's counters
(after minus before), so every run is cross-checked against vLLM's own numbers.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone

import httpx
from pydantic import ValidationError

from .. import __version__
from ..runfile import LENIENT, RequestSpecDecodeMetrics, Run, RunMeta, SpecDecodeCounters, Step, first_error
from .counters import counters_delta, scrape_spec_counters, sum_counters
from .server import EngineError, Server
from .stream import StreamResult, stream_completion
from .trace_reader import TraceReader, _steps_within, placeholder_only_reason, steps_by_request

# Sent before measuring to start the engine's lazy work; not a prompt of any set, so the measured
# requests do not find their own prompts in vLLM's prefix cache.
WARMUP_PROMPT = "Warm-up request: name three colours."


def warmup_prompts(n: int) -> list[str]:
    """n distinct warm-up prompts, none of them in any prompt set: 'Warm-up request: ... (request 2 of 4)'."""
    return [f"{WARMUP_PROMPT} (request {i + 1} of {n})" for i in range(n)]


def load_tokenizer(model: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model)


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
    tokenizer=None,
    chat: bool = True,
    warmup: bool = True,
    on_request_done: Callable[[StreamResult], None] | None = None,
) -> Run:
    """Send every prompt (at most `concurrency` in flight), join the tracer's steps, return the Run.

    `server` is one specviz started (LocalServer) or one it attached to (serving.attached). Nothing
    measured is thrown away:
    - a request the server refuses (a prompt longer than the context: HTTP 400) is kept with its
      error, and the others go on;
    - if the server dies part-way, the Run holds what arrived, with complete=False and the reason;
    - if the recording breaks the run's invariants, the Run keeps its steps unchecked, the tracer's
      raw records, and meta.invalid_reason.

    The warm-up sends WARMUP_PROMPT, not a prompt of the set, so no measured request finds its
    own prompt in vLLM's prefix cache.

    Raises EngineError before measuring when the warm-up's trace holds only placeholder drafts
    (the server's scheduler cannot see drafts: see placeholder_only_reason).
    """
    tokenizer = tokenizer or server.tokenizer()
    texts = [apply_chat_template(tokenizer, p) if chat else p for p in prompts]
    sampling = {"max_tokens": max_tokens, "temperature": temperature, "top_p": 1.0, "seed": seed}
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
                stream_completion(client, m.url, m.model, warmup_text, f"warmup-{run_id}-{j}",
                                  sampling | {"max_tokens": min(8, max_tokens)})
        warmup_records = [rec for reader in readers for rec in reader.read_new()]
        if server.speculative_config() and (why := placeholder_only_reason(warmup_records)):
            raise EngineError(f"cannot trace this server: {why}")
        before = _try(lambda: sum_counters([scrape_spec_counters(m.url) for m in members]))

        def one(i: int) -> StreamResult:
            m = members[i % len(members)]
            res = stream_completion(client, m.url, m.model, texts[i], request_ids[i], sampling)
            if on_request_done:
                with lock:
                    on_request_done(res)
            return res

        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            results = list(pool.map(one, range(len(texts))))
        after = _try(lambda: sum_counters([scrape_spec_counters(m.url) for m in members])) if server.alive() else None

    # The tracer writes a step before its tokens reach the client, so by now every step is on disk.
    records = [rec for reader in readers for rec in reader.read_new()]
    reason = None
    if not server.alive():
        errors = [r.error for r in results if r.error]
        reason = (f"the vLLM server died during the run ({errors[0] if errors else 'the server stopped'}). "
                  f"Server log tail:\n{server.log_tail(15)}")
    invalid = placeholder_only_reason(records) if server.speculative_config() else None
    decode = token_decoder(tokenizer)
    try:
        steps = steps_by_request(records, request_ids, decode) if readers else {}
    except ValidationError as e:
        invalid = invalid or f"a tracer record breaks a step's invariants {first_error(e)}"
        steps = steps_by_request(records, request_ids, decode, context=LENIENT)
    return build_run(server, results, steps, run_id=run_id, prompt_set=prompt_set, concurrency=concurrency,
                     max_tokens=max_tokens, sampling=sampling, incomplete_reason=reason,
                     user_messages=list(prompts) if chat else None,
                     counters=counters_delta(before, after) if reason is None else None,
                     invalid_reason=invalid, raw_trace_records=records, decode=decode)


def build_run(
    server: Server, results: list[StreamResult], steps: dict[str, list[Step]], *, run_id: str,
    prompt_set: str, concurrency: int, max_tokens: int, sampling: dict, incomplete_reason: str | None = None,
    counters: SpecDecodeCounters | None = None, user_messages: list[str | None] | None = None,
    invalid_reason: str | None = None, raw_trace_records: list[dict] | None = None,
    decode: Callable[[int], str] | None = None,
) -> Run:
    """Assemble a Run from what the client saw and the tracer's steps, with this machine's provenance.

    `user_messages[i]` is the text the chat template wrapped into results[i].prompt (None if none was used).
    Without the tracer, `decode` (token id -> text) gives each output token its text for the step view.
    A Run that breaks its invariants (or arrives with `invalid_reason`) is still returned, marked
    invalid with the violation and carrying `raw_trace_records`, so it can be saved and inspected.
    """
    requests = []
    for res, user_message in zip(results, user_messages or [None] * len(results)):
        req_steps = steps.get(res.request_id, []) if server.trace else []
        if res.finish_reason is None:  # cut off: keep the steps whose tokens reached the client
            req_steps = _steps_within(req_steps, len(res.token_ids))
        requests.append(dict(
            request_id=res.request_id, prompt=res.prompt, user_message=user_message,
            prompt_token_ids=res.prompt_token_ids,
            output_token_ids=res.token_ids, output_text=res.text, start_time_s=res.start_time_s,
            output_token_texts=[decode(t) for t in res.token_ids] if decode and not server.trace else [],
            first_token_time_s=res.first_token_time_s, end_time_s=res.end_time_s,
            finish_reason=res.finish_reason, error=res.error, steps=req_steps, stream_chunks=res.chunks,
            spec_decode_metrics=_spec_decode_metrics(res.spec_decode_metrics),
        ))
    spec_config = server.speculative_config()
    where = server.provenance()
    meta = RunMeta(
        run_id=run_id,
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        specviz_version=__version__,
        vllm_version=where.vllm_version,
        platform=where.platform,
        device_name=where.device_name,
        async_scheduling=where.async_scheduling,
        traced=server.trace,
        server_url=where.server_url,
        attention_backends=where.attention_backends,
        target_model=server.model,
        speculative_config=spec_config,
        method=spec_config.get("method") if spec_config else None,
        num_speculative_tokens=spec_config["num_speculative_tokens"] if spec_config else None,
        sampling=sampling,
        prompt_set=prompt_set,
        concurrency=concurrency,
        max_tokens=max_tokens,
        complete=incomplete_reason is None,
        incomplete_reason=incomplete_reason,
        vllm_counters=counters,
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


def _try(fn):
    try:
        return fn()
    except httpx.HTTPError:
        return None


def token_decoder(tokenizer) -> Callable[[int], str]:
    """tokenizer.decode([id]) with a cache: token texts for display."""
    cache: dict[int, str] = {}

    def decode(token_id: int) -> str:
        if token_id not in cache:
            cache[token_id] = tokenizer.decode([token_id])
        return cache[token_id]

    return decode

