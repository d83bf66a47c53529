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

from ..runfile import StreamChunk


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


def stream_completion(
    client: httpx.Client, url: str, model: str, prompt: str, request_id: str, sampling: dict,
    on_chunk: Callable[[StreamResult], None] | None = None,
) -> StreamResult:
    """POST /v1/completions with stream=true; never raises for server failures (see .error)."""
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
    except (httpx.HTTPError, json.JSONDecodeError, KeyError, IndexError) as e:
        result.error = f"{type(e).__name__}: {e}"
    result.end_time_s = time.time() if result.error is None else None
    return result

