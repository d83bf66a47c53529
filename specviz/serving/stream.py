"""One streamed completion, as the client sees it.

Each request carries an X-Request-Id; vLLM names the engine request "cmpl-<id>-<i>-<random>",
which is how the tracer's step records are joined back to the client's streams (trace_reader).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from ..runfile import StreamChunk, TokenCandidates

CANCELLED = "cancelled: the recording was interrupted (Ctrl-C) while this request was in flight"


@dataclass
class StreamResult:
    """What the client saw of one streamed completion."""

    request_id: str
    prompt: str
    start_time_s: float
    prompt_token_ids: list[int] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    text: str = ""
    first_token_time_s: float | None = None
    end_time_s: float | None = None
    finish_reason: str | None = None
    error: str | None = None
    chunks: list[StreamChunk] = field(default_factory=list)
    spec_decode_metrics: dict | None = None  # vLLM's per-request figures, on the final usage chunk
    top_logprobs: list[TokenCandidates] | None = None  # per output token, when the request asked for logprobs


def stream_completion(
    client: httpx.Client, url: str, model: str, prompt: str, request_id: str, sampling: dict,
    on_chunk: Callable[[StreamResult], None] | None = None, cancelled: Callable[[], bool] | None = None,
) -> StreamResult:
    """POST /v1/completions with stream=true; never raises for server failures (see .error).

    `cancelled()` is asked after every chunk: True closes the stream (vLLM aborts the request) with
    .error = CANCELLED, keeping what arrived."""
    result = StreamResult(request_id=request_id, prompt=prompt, start_time_s=time.time())
    # include_usage makes vLLM send a final chunk that carries per-request spec-decode metrics
    # when the server has --per-request-spec-decode-metrics.
    body = {"model": model, "prompt": prompt, "stream": True, "return_token_ids": True,
            "stream_options": {"include_usage": True}} | sampling
    try:
        with client.stream("POST", f"{url}/v1/completions", json=body, headers={"X-Request-Id": request_id}) as r:
            if r.status_code != 200:
                r.read()
                result.error = f"HTTP {r.status_code}: {r.text[:500]}"
                return result
            for line in r.iter_lines():
                if not line.startswith("data: "):
                    continue
                payload = line.removeprefix("data: ")
                if payload == "[DONE]":
                    break
                chunk = json.loads(payload)
                if "error" in chunk:
                    result.error = str(chunk["error"])
                    break
                if not chunk["choices"]:  # the final usage chunk
                    result.spec_decode_metrics = (chunk.get("metrics") or {}).get("speculative_decoding")
                    continue
                choice = chunk["choices"][0]
                result.prompt_token_ids = result.prompt_token_ids or choice.get("prompt_token_ids") or []
                ids = choice.get("token_ids") or []
                text = choice.get("text") or ""
                if sampling.get("logprobs"):
                    result.top_logprobs = (result.top_logprobs or []) + candidates_of(choice.get("logprobs"), ids)
                if ids:  # chunks first: a reader in another thread copies chunks, then derives the rest
                    now = time.time()
                    result.chunks.append(StreamChunk(time_s=now, token_ids=ids, text=text))
                    result.first_token_time_s = result.first_token_time_s or now
                    result.token_ids += ids
                result.text += text
                if choice.get("finish_reason"):
                    result.finish_reason = choice["finish_reason"]
                if on_chunk:
                    on_chunk(result)
                if cancelled is not None and cancelled():
                    result.error = CANCELLED
                    break
    except (httpx.HTTPError, json.JSONDecodeError, KeyError, IndexError) as e:
        result.error = f"{type(e).__name__}: {e}"
    result.end_time_s = time.time() if result.error is None else None
    return result



def candidates_of(logprobs: dict | None, token_ids: list[int]) -> list[TokenCandidates]:
    """The top candidates of each token in one chunk, from vLLM's completions `logprobs` object.

    With `return_tokens_as_token_ids` vLLM names tokens "token_id:1734" (texts would collide):

        {"top_logprobs": [{"token_id:1734": -0.61, "token_id:2583": -0.74}], ...}, token_ids=[1734]
        -> [TokenCandidates(token_ids=[1734, 2583], logprobs=[-0.61, -0.74])]

    Raises KeyError when the chunk's logprobs do not cover its tokens (the run must not silently
    hold logprobs for fewer tokens than it has).
    """
    tops = (logprobs or {}).get("top_logprobs") or []
    if len(tops) != len(token_ids):
        raise KeyError(f"logprobs for {len(tops)} tokens in a chunk of {len(token_ids)}")
    out = []
    for top in tops:
        try:  # -inf (a masked token) would not survive JSON: clamp it
            ranked = sorted(((int(name.removeprefix("token_id:")), max(float(lp), -1e9)) for name, lp in (top or {}).items()),
                            key=lambda c: -c[1])
        except ValueError as e:
            raise KeyError(f"logprobs name tokens by text, not 'token_id:N' (return_tokens_as_token_ids ignored?): {e}") from e
        out.append(TokenCandidates(token_ids=[t for t, _ in ranked], logprobs=[lp for _, lp in ranked]))
    return out
