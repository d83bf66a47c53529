"""Start a local vLLM server with the tracer, stream completions through it, and build a Run.

    with LocalServer(model="/models/SmolLM2", spec=SpecConfig.parse('{"method":"ngram",...}')) as server:
        server.start(progress=print)              # waits for /health, shows the log tail on failure
        run = record(server, prompts, prompt_set="chat", concurrency=4, max_tokens=128)

The server is `python -m vllm.entrypoints.openai.api_server` in its own process group, so
stop() ends the API server, its EngineCore child and anything they spawned. Each request carries
an X-Request-Id; vLLM names the engine request "cmpl-<id>-<i>-<random>", which is how the
tracer's step records are joined back to the client's streams.
"""

from __future__ import annotations

import atexit
import json
import os
import platform as py_platform
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
from prometheus_client.parser import text_string_to_metric_families
from pydantic import ValidationError

from . import __version__
from .base import SpecvizError
from .config import SpecConfig
from .platforms import attention_backends_from_log, detect_platform
from .trace import (LENIENT, TRACE_FILE_ENV, RequestSpecDecodeMetrics, Run, RunMeta, SpecDecodeCounters, Step,
                    StreamChunk, first_error)

if TYPE_CHECKING:
    from .attach import AttachedServer

REPO_ROOT = Path(__file__).resolve().parent.parent
# Sent before measuring to start the engine's lazy work; not a prompt of any set, so the measured
# requests do not find their own prompts in vLLM's prefix cache.
WARMUP_PROMPT = "Warm-up request: name three colours."
TRACER_CLS = "specviz.tracer.TracingScheduler"


class EngineError(SpecvizError, RuntimeError):
    """The engine could not start or died; the message carries the log tail."""


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@cache
def local_device() -> tuple[str, str]:
    """(vLLM platform name, device name) of this machine, e.g. ('cpu', 'AMD EPYC 9654 96-Core Processor')."""
    try:
        from vllm.platforms import current_platform

        name = current_platform.device_name
        device = current_platform.get_device_name() if not current_platform.is_cpu() else ""
    except Exception:  # vLLM missing or its platform detection failed: still record what we can
        name, device = None, ""
    try:
        import torch

        hip, cuda = getattr(torch.version, "hip", None), getattr(torch.version, "cuda", None)
    except ImportError:
        hip = cuda = None
    name = detect_platform(name, torch_hip=hip, torch_cuda=cuda)
    if not device:
        device = _cpu_model() or py_platform.processor() or py_platform.machine()
    return name, device


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


@dataclass(frozen=True)
class Provenance:
    """Where a run was served: recorded in every run's meta."""

    platform: str  # vLLM's platform name: cpu, rocm, cuda; 'unknown' for a remote server
    device_name: str
    vllm_version: str
    async_scheduling: bool | None  # None when it cannot be known
    server_url: str | None = None  # an attached server's URL; None for a server specviz started
    attention_backends: list[str] = field(default_factory=list)  # as vLLM's log names them, when readable


@dataclass(eq=False)  # identity semantics: servers live in a set
class LocalServer:
    """A vLLM OpenAI-compatible server started by specviz, traced by specviz.tracer."""

    model: str
    spec: SpecConfig | None = None
    port: int | None = None
    dtype: str = "auto"
    max_model_len: int = 2048
    seed: int = 0
    trace: bool = True
    extra_args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    workdir: Path | None = None  # log and trace files; a fresh temp dir if None

    proc: subprocess.Popen | None = field(default=None, init=False, repr=False)
    start_time_s: float | None = field(default=None, init=False)
    ready_after_s: float | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.workdir = Path(self.workdir or tempfile.mkdtemp(prefix="specviz-server-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.workdir / "server.log"
        self.trace_path = self.workdir / "trace.jsonl"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        cmd = [
            sys.executable, "-m", "vllm.entrypoints.openai.api_server",
            "--model", self.model,
            "--host", "127.0.0.1", "--port", str(self.port),
            "--dtype", self.dtype,
            "--max-model-len", str(self.max_model_len),
            "--seed", str(self.seed),
        ]
        if local_device()[0] == "cpu":  # no graphs to capture on CPU; eager starts faster
            cmd.append("--enforce-eager")
        if self.spec is not None:
            cmd += ["--speculative-config", json.dumps(self.spec.to_vllm())]
        if self.trace:
            cmd += ["--scheduler-cls", TRACER_CLS, "--no-async-scheduling"]
        return cmd + self.extra_args

    def start(self, progress: Callable[[float, str], None] | None = None, timeout_s: float = 900) -> float:
        """Start the server and wait until /health answers; return the seconds it took.

        `progress(elapsed_s, log_tail)` is called twice a second with the last 8 lines of the log.

        Raises EngineError (with the server's last log lines) if the model folder is missing, the
        port is taken, or the server exits or does not become healthy within timeout_s.
        """
        if not Path(self.model).is_dir():
            raise EngineError(f"model folder {self.model!r} does not exist (specviz serves local model folders)")
        if self.spec is not None:
            self.spec.check_local_paths()
        if self.port is None:
            self.port = free_port()
        elif not port_is_free(self.port):
            raise EngineError(f"port {self.port} is already in use: choose another port or stop what uses it")
        env = os.environ | {
            "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1"),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
            TRACE_FILE_ENV: str(self.trace_path),
            "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1"),
        } | self.env
        self.trace_path.unlink(missing_ok=True)
        log = open(self.log_path, "wb")  # noqa: SIM115 (the child keeps writing to it)
        self.start_time_s = time.time()
        self.proc = subprocess.Popen(
            self.command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=env, start_new_session=True,
        )
        log.close()
        _live_servers.add(self)
        deadline = time.monotonic() + timeout_s
        with httpx.Client(timeout=2.0) as client:
            while True:
                elapsed = time.time() - self.start_time_s
                if self.proc.poll() is not None:
                    code = self.proc.returncode
                    self.stop()
                    raise EngineError(f"vLLM exited with code {code} while starting.\n{self.log_tail()}")
                try:
                    if client.get(f"{self.url}/health").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    self.stop()
                    raise EngineError(f"vLLM did not become healthy within {timeout_s:.0f} s.\n{self.log_tail()}")
                if progress:
                    progress(elapsed, self.log_tail(8))
                time.sleep(0.5)
        self.ready_after_s = time.time() - self.start_time_s
        return self.ready_after_s

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def tokenizer(self):
        return load_tokenizer(self.model)

    def members(self) -> list[LocalServer]:
        return [self]

    def speculative_config(self) -> dict | None:
        return self.spec.to_vllm() if self.spec else None

    def provenance(self) -> Provenance:
        platform_name, device = local_device()
        # A traced server runs with --no-async-scheduling; the CPU platform forces it off anyway.
        try:
            backends = attention_backends_from_log(self.log_path.read_text(errors="replace"))
        except OSError:
            backends = []
        return Provenance(platform=platform_name, device_name=device, vllm_version=vllm_version(),
                          async_scheduling=not self.trace and platform_name != "cpu", attention_backends=backends)

    def log_tail(self, n: int = 30) -> str:
        try:
            with open(self.log_path, "rb") as f:
                return b"".join(deque(f, maxlen=n)).decode(errors="replace").rstrip()
        except OSError:
            return ""

    def stop(self, grace_s: float = 20) -> None:
        """End the server's whole process group: SIGTERM, then SIGKILL for whatever is left after grace_s."""
        _live_servers.discard(self)
        if self.proc is None:
            return
        pgid = self.proc.pid
        for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10)):
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                break
            if self._group_ends_within(pgid, wait_s):
                break
        self.proc.poll()
        self.proc = None

    def _group_ends_within(self, pgid: int, wait_s: float) -> bool:
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            self.proc.poll()  # reap the leader, or it counts as a zombie member forever
            if not live_group_members(pgid):
                return True
            time.sleep(0.1)
        return False

    def __enter__(self) -> LocalServer:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def live_group_members(pgid: int) -> list[int]:
    """Pids of processes in group pgid that are still running (zombies, already dead, are left out)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        state, pgrp = fields[0], int(fields[2])
        if pgrp == pgid and state != "Z":
            members.append(int(stat.parent.name))
    return members


_live_servers: set[LocalServer] = set()


@atexit.register
def _stop_all_servers() -> None:
    for server in list(_live_servers):
        server.stop(grace_s=5)


# ---- vLLM's counters ---------------------------------------------------------------------------

_COUNTER_FIELDS = {
    "vllm:spec_decode_num_drafts": "num_drafts",
    "vllm:spec_decode_num_draft_tokens": "num_draft_tokens",
    "vllm:spec_decode_num_accepted_tokens": "num_accepted_tokens",
}


def parse_spec_counters(metrics_text: str) -> SpecDecodeCounters | None:
    """vLLM's spec-decode counters from a /metrics page, summed over engines; None if absent."""
    totals = {f: 0 for f in _COUNTER_FIELDS.values()}
    per_pos: dict[int, int] = {}
    seen = False
    for family in text_string_to_metric_families(metrics_text):
        for sample in family.samples:
            if not sample.name.endswith("_total"):
                continue
            base = sample.name.removesuffix("_total")
            if base in _COUNTER_FIELDS:
                totals[_COUNTER_FIELDS[base]] += int(sample.value)
                seen = True
            elif base == "vllm:spec_decode_num_accepted_tokens_per_pos":
                pos = int(sample.labels["position"])
                per_pos[pos] = per_pos.get(pos, 0) + int(sample.value)
    if not seen:
        return None
    vector = [per_pos.get(i, 0) for i in range(max(per_pos) + 1)] if per_pos else []
    return SpecDecodeCounters(**totals, num_accepted_tokens_per_pos=vector)


def scrape_spec_counters(url: str) -> SpecDecodeCounters | None:
    r = httpx.get(f"{url}/metrics", timeout=10)
    r.raise_for_status()
    return parse_spec_counters(r.text)


def sum_counters(counters: list[SpecDecodeCounters | None]) -> SpecDecodeCounters | None:
    """Counters of several servers added up; None if none of them speculates."""
    present = [c for c in counters if c is not None]
    if not present:
        return None
    width = max(len(c.num_accepted_tokens_per_pos) for c in present)
    return SpecDecodeCounters(
        num_drafts=sum(c.num_drafts for c in present),
        num_draft_tokens=sum(c.num_draft_tokens for c in present),
        num_accepted_tokens=sum(c.num_accepted_tokens for c in present),
        num_accepted_tokens_per_pos=[sum(c.num_accepted_tokens_per_pos[j] for c in present
                                         if j < len(c.num_accepted_tokens_per_pos)) for j in range(width)],
    )


def counters_delta(before: SpecDecodeCounters | None, after: SpecDecodeCounters | None) -> SpecDecodeCounters | None:
    if after is None:
        return None
    if before is None:
        return after
    width = max(len(before.num_accepted_tokens_per_pos), len(after.num_accepted_tokens_per_pos))
    pad = lambda v: v + [0] * (width - len(v))  # noqa: E731
    return SpecDecodeCounters(
        num_drafts=after.num_drafts - before.num_drafts,
        num_draft_tokens=after.num_draft_tokens - before.num_draft_tokens,
        num_accepted_tokens=after.num_accepted_tokens - before.num_accepted_tokens,
        num_accepted_tokens_per_pos=[a - b for a, b in zip(pad(after.num_accepted_tokens_per_pos),
                                                           pad(before.num_accepted_tokens_per_pos))],
    )


# ---- streaming ---------------------------------------------------------------------------------


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


# ---- the tracer's records ----------------------------------------------------------------------


class TraceReader:
    """Reads the tracer's JSON-lines file incrementally; a half-written last line waits for the next read.

    Follows the tracer's rotation (SPECVIZ_TRACE_MAX_MB): when the file it was reading has become
    "<file>.1", it reads the rest of that one, then the new file from its start.
    """

    TAIL_BYTES = 1 << 16  # from_end looks this far back for the last whole line

    def __init__(self, path: Path, from_end: bool = False) -> None:
        self.path = Path(path)
        self._offset = 0
        self._inode: int | None = None
        try:
            with open(self.path, "rb") as f:
                self._inode = os.fstat(f.fileno()).st_ino
                if from_end:  # skip earlier runs' records unread: seek, never load the whole file
                    self._offset = _end_of_last_line(f, self.TAIL_BYTES)
        except FileNotFoundError:
            pass

    def read_new(self) -> list[dict]:
        data = b""
        try:
            with open(self.path, "rb") as f:
                inode = os.fstat(f.fileno()).st_ino
                if self._inode is not None and inode != self._inode:  # rotated since the last read
                    data = self._rest_of_rotated()
                    self._offset = 0
                self._inode = inode
                f.seek(self._offset)
                fresh = f.read()
        except FileNotFoundError:
            return []
        end = fresh.rfind(b"\n") + 1
        self._offset += end
        data += fresh[:end]
        return [json.loads(line) for line in data.splitlines() if line.strip()]

    def _rest_of_rotated(self) -> bytes:
        rotated = self.path.with_name(self.path.name + ".1")
        try:
            with open(rotated, "rb") as f:
                if os.fstat(f.fileno()).st_ino != self._inode:
                    return b""  # rotated more than once between two reads: the middle is gone
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return b""
        return data[: data.rfind(b"\n") + 1]


def _end_of_last_line(f, window: int) -> int:
    """The offset just past the last newline of an open binary file, reading at most `window` bytes per probe."""
    end = f.seek(0, os.SEEK_END)
    pos = end
    while pos > 0:
        start = max(0, pos - window)
        f.seek(start)
        chunk = f.read(pos - start)
        at = chunk.rfind(b"\n")
        if at >= 0:
            return start + at + 1
        pos = start
    return 0


def client_request_id(engine_id: str) -> str:
    """'cmpl-abc-7-0-1f2e3d4c' -> 'abc-7': strip vLLM's prefix, choice index and random suffix."""
    return engine_id.removeprefix("cmpl-").rsplit("-", 2)[0]


def steps_by_request(records: list[dict], request_ids: list[str], decode: Callable[[int], str], *,
                     context: dict | None = None) -> dict[str, list[Step]]:
    """Join tracer records to client request ids ("cmpl-<id>-..." engine ids).

    Raises pydantic's ValidationError for a record that breaks a step's invariants, unless
    `context` is trace.LENIENT (an invalid run keeps its steps as recorded).
    """
    out: dict[str, list[Step]] = {rid: [] for rid in request_ids}
    for rec in records:
        for entry in rec["reqs"]:
            engine_id, drafts, sampled, committed = entry[:4]
            padded = entry[4] if len(entry) > 4 else 0  # tracers before specviz 0.2 wrote four fields
            rid = client_request_id(engine_id)
            if rid not in out:  # another client's request (a warm-up, or a second user)
                continue
            out[rid].append(Step.model_validate(dict(
                engine_step=rec["step"], time_s=rec["t"],
                draft_token_ids=drafts, sampled_token_ids=sampled, committed_token_ids=committed,
                num_accepted=len(sampled) - 1 if (drafts or padded) else 0, num_padded_drafts=padded,
                draft_texts=[decode(t) for t in drafts], sampled_texts=[decode(t) for t in sampled],
            ), context=context))
    return out


def warmup_prompts(n: int) -> list[str]:
    """n distinct warm-up prompts, none of them in any prompt set: 'Warm-up request: ... (request 2 of 4)'."""
    return [f"{WARMUP_PROMPT} (request {i + 1} of {n})" for i in range(n)]


def placeholder_only_reason(records: list[dict]) -> str | None:
    """Why a trace is useless, when every decode step verified placeholders only (V2 runner, async scheduling).

    vLLM pads a request's first step at most once per admission, so a few padded steps are normal;
    a trace in which every decode step (a request's entries after its first) had padding and no
    real draft was recorded where the scheduler never sees the drafts.
    """
    seen: set[str] = set()
    decode_entries = []
    for rec in records:
        for entry in rec["reqs"]:
            if entry[0] in seen:
                decode_entries.append(entry)
            seen.add(entry[0])
    if decode_entries and all(len(e) > 4 and e[4] and not e[1] for e in decode_entries):
        return ("every decode step verified only placeholder drafts (-1): the server schedules asynchronously "
                "or runs vLLM's V2 model runner, where the scheduler never sees the drafts. Restart it with "
                "--no-async-scheduling and VLLM_USE_V2_MODEL_RUNNER=0 to trace.")
    return None


def _steps_within(steps: list[Step], n_tokens: int) -> list[Step]:
    """The leading steps whose committed tokens fit in n_tokens (for a request cut off mid-run)."""
    kept, total = [], 0
    for s in steps:
        total += len(s.committed_token_ids)
        if total > n_tokens:
            break
        kept.append(s)
    return kept


# ---- recording a run ---------------------------------------------------------------------------


def load_tokenizer(model: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model)


def apply_chat_template(tokenizer, prompt: str) -> str:
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                             add_generation_prompt=True)
    return prompt


def vllm_version() -> str:
    try:
        from vllm import __version__ as v
    except ImportError:
        return "unknown"
    return v


def record(
    server: LocalServer | AttachedServer,
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

    `server` is one specviz started (LocalServer) or one it attached to (specviz.attach). Nothing
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
                     invalid_reason=invalid, raw_trace_records=records)


def build_run(
    server: LocalServer | AttachedServer, results: list[StreamResult], steps: dict[str, list[Step]], *, run_id: str,
    prompt_set: str, concurrency: int, max_tokens: int, sampling: dict, incomplete_reason: str | None = None,
    counters: SpecDecodeCounters | None = None, user_messages: list[str | None] | None = None,
    invalid_reason: str | None = None, raw_trace_records: list[dict] | None = None,
) -> Run:
    """Assemble a Run from what the client saw and the tracer's steps, with this machine's provenance.

    `user_messages[i]` is the text the chat template wrapped into results[i].prompt (None if none was used).
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
