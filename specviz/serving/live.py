"""One request generated live: the output and its verification steps grow as the engine runs.

    gen = LiveGeneration(server, "The weather today is", max_tokens=64, tokenizer=tok)
    gen.start()                      # streams in a background thread
    gen.stop()                       # closes the stream; vLLM aborts the request
    run, done = gen.snapshot()       # the Run so far, steps joined from the tracer; once it ended by
                                     # itself, vLLM's spec-decode counters for it, to cross-check the steps
    for run, done in gen.follow():   # a snapshot every 0.2 s until it ends

No Streamlit here: a page draws each snapshot of `follow()`.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator

import httpx

from ..runfile import Run, SpecDecodeCounters, Step
from .counters import counters_delta, scrape_members_counters
from .engine_log import failed_on_the_server
from .recording import apply_chat_template, build_run, sampling_params, token_decoder
from .server import Server
from .stream import StreamResult, stream_completion
from .trace_reader import TraceReader, steps_by_request


class _Stopped(Exception):
    pass


class LiveGeneration:
    def __init__(self, server: Server, prompt: str, *, max_tokens: int, tokenizer, temperature: float = 0.0,
                 seed: int = 0, chat: bool = True) -> None:
        self.server = server
        self.text = apply_chat_template(tokenizer, prompt) if chat else prompt
        self.user_messages = [prompt] if chat else None
        self.sampling = sampling_params(max_tokens=max_tokens, temperature=temperature, seed=seed)
        self.run_id = uuid.uuid4().hex[:12]
        self.request_id = f"{self.run_id}-0"
        self._decode = token_decoder(tokenizer)
        self._reader = TraceReader(server.trace_path, from_end=True) if server.trace else None
        self._steps: list[Step] = []  # joined incrementally: a redraw costs the same at step 10 and step 2000
        self._result = StreamResult(request_id=self.request_id, prompt=self.text, start_time_s=time.time())
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.stopped_by_user = False
        self._engine_error: str | None = None  # read from the server's log once the request failed there
        self._counters_before: SpecDecodeCounters | None = None  # scraped just before the request is sent
        self._counters: SpecDecodeCounters | None = None  # this request's share, once it finished by itself

    def start(self) -> LiveGeneration:
        self._thread.start()
        return self

    def _run(self) -> None:
        def on_chunk(res: StreamResult) -> None:
            self._result = res  # the same object, growing; read by snapshot()
            if self._stop.is_set():
                raise _Stopped  # leaving the stream closes the connection: vLLM aborts the request

        self._counters_before = self._scrape_counters()
        with httpx.Client(timeout=httpx.Timeout(None, connect=10.0)) as client:
            try:
                self._result = stream_completion(client, self.server.url, self.server.model, self.text,
                                                 self.request_id, self.sampling, on_chunk=on_chunk)
            except _Stopped:
                self.stopped_by_user = True

    def _scrape_counters(self) -> SpecDecodeCounters | None:
        return None if self.server.spec is None else scrape_members_counters(self.server.members())

    @property
    def done(self) -> bool:
        return not self._thread.is_alive()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def follow(self, every_s: float = 0.2) -> Iterator[tuple[Run, bool]]:
        """snapshot() every `every_s` seconds until the generation ends; the last one has done=True."""
        while True:
            run, done = self.snapshot()
            yield run, done
            if done:
                return
            time.sleep(every_s)

    def snapshot(self) -> tuple[Run, bool]:
        """(the generation so far as a one-request Run, whether it has ended).

        The Run is complete only if the request finished by itself; while it runs, or after Stop,
        it holds the tokens that reached the client and the steps that produced them. A request that
        failed on the server carries the engine's own error from its log (meta.engine_error).
        """
        done = self.done  # read first: a result read after this is at least as new
        if self._reader:
            self._steps += steps_by_request(self._reader.read_new(), [self.request_id], self._decode)[self.request_id]
        res = self._result
        reason = engine_error = None
        if done and failed_on_the_server(res.error):
            self._engine_error = self._engine_error or self.server.engine_error()
            engine_error = self._engine_error
        if self.stopped_by_user:
            reason = "stopped by the user"
        elif res.error:
            reason = res.error
        elif not done:
            reason = "in progress"
        if reason is None and self._counters is None and self._counters_before is not None:
            # vLLM records a step's counters before it streams that step's tokens, so by now they hold all of it.
            # Another request on the same engine in the meantime would be counted too, and show as a mismatch.
            self._counters = counters_delta(self._counters_before, self._scrape_counters())
        run = build_run(self.server, [res if reason is None else _as_cut_off(res)], {self.request_id: self._steps},
                        run_id=self.run_id,
                        prompt_set="playground", concurrency=1, max_tokens=self.sampling["max_tokens"],
                        sampling=self.sampling, incomplete_reason=reason, user_messages=self.user_messages,
                        engine_error=engine_error, counters=self._counters if reason is None else None,
                        decode=self._decode)
        return run, done


def _as_cut_off(res: StreamResult) -> StreamResult:
    """A consistent copy of a result that may still be growing in another thread (built from its chunks)."""
    chunks = list(res.chunks)
    return StreamResult(request_id=res.request_id, prompt=res.prompt, start_time_s=res.start_time_s,
                        prompt_token_ids=list(res.prompt_token_ids),
                        token_ids=[t for c in chunks for t in c.token_ids], text="".join(c.text for c in chunks),
                        first_token_time_s=res.first_token_time_s, chunks=chunks,
                        top_logprobs=None if res.top_logprobs is None else res.top_logprobs[:sum(len(c.token_ids) for c in chunks)],
                        end_time_s=res.end_time_s, finish_reason=res.finish_reason)
