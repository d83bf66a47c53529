"""Attach to a vLLM server that is already running (this machine or another, e.g. a ROCm box).

    server = attach("http://mi300x-box:8000")            # checks /health, reads /v1/models, /version, /metrics
    for view in server.views(): print(view.name, view.available, view.why)
    run = record(server, prompts, prompt_set="chat", concurrency=4, max_tokens=128)   # engine.record

What specviz can show depends on how that server was started, and `views()` says which views
it has and why the others are missing:

- tokens committed per step, from the stream itself: always (vLLM sends one chunk per engine
  step while the client keeps up; a client that falls behind gets steps merged into one chunk);
- vLLM's spec-decode counters from `/metrics`: when the server speculates;
- per-request acceptance: when it runs with `--per-request-spec-decode-metrics summary|detailed`;
- per-step acceptance without the tracer (untraced_steps): with `detailed`, vLLM's per-step accepted
  and drafted counts, placed on the streamed tokens; any scheduler, async scheduling on or off;
- the drafts themselves: when it runs the specviz tracer and its trace file is readable here
  (same machine), so a ROCm user records runs on the ROCm box and opens them anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import httpx

from ..base import SpecvizError
from ..config import UNREPORTED_METHOD, SpecConfig
from ..runfile import Run, SpecDecodeCounters
from ..untraced_steps import has_step_arrays
from .counters import parse_spec_counters
from .server import EngineError, Provenance, local_device

LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", "0.0.0.0"}
STEP_ARRAYS_FLAG = "--per-request-spec-decode-metrics detailed"  # the one flag the tracer-free step view needs
STEP_ARRAYS_VIEW = "per-step acceptance without the tracer (vLLM's per-request arrays)"
TRACER_VIEW = "drafts, accepted prefix, correction and discarded tail (specviz tracer)"


class AttachError(SpecvizError, RuntimeError):
    """The server cannot be used; the message says what to check."""


class EndpointError(AttachError, EngineError):
    """An attached server's endpoint failed during a run (an EngineError too, so `record` reports it as it reports
    a server that died, instead of a traceback)."""


NOT_VLLM = ("{url} is not a vLLM server: {why}. Give the URL of a vLLM OpenAI-compatible server "
            "(`python -m vllm.entrypoints.openai.api_server --model ...`, or `vllm serve`), host and port")


def _json_or_none(response: httpx.Response):
    """The JSON body of a 200 answer, else None."""
    if response.status_code != 200:
        return None
    try:
        return response.json()
    except ValueError:
        return None


def _listed_models(body) -> list[dict] | None:
    """/v1/models as vLLM answers it ({"object": "list", "data": [{"id": ..., "root": ...}, ...]}), else None."""
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list) or not all(isinstance(m, dict) and isinstance(m.get("id"), str) for m in data):
        return None
    return data


@dataclass(frozen=True)
class View:
    name: str
    available: bool | None  # None: known only after a request (what vLLM sends with each request's last chunk)
    why: str  # how it is known, or what to change to get it


@dataclass(eq=False)
class AttachedServer:
    """A running vLLM OpenAI-compatible server that specviz did not start (and will not stop)."""

    url: str
    model: str  # the served model name, as /v1/models lists it
    model_root: str  # the checkpoint it serves (a path or hub id)
    vllm_version: str
    max_model_len: int | None
    counters: SpecDecodeCounters | None  # at attach time; None when the server does not speculate
    spec: SpecConfig | None = None  # what it drafts (attach: the user's config, else spec_from_counters); None: none
    trace_path: Path | None = None  # the tracer's SPECVIZ_TRACE_FILE, when this machine can read it
    notes: list[str] = field(default_factory=list)

    @property
    def trace(self) -> bool:
        return self.trace_path is not None

    @property
    def is_local(self) -> bool:
        return urlparse(self.url).hostname in LOCAL_HOSTS

    @property
    def num_speculative_tokens(self) -> int | None:
        """k, from the user's config or from the length of vLLM's per-position counter vector; None if unknown."""
        return self.spec.num_speculative_tokens if self.spec else None

    def alive(self) -> bool:
        try:
            return httpx.get(f"{self.url}/health", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    def log_tail(self, n: int = 30) -> str:
        return "(the server's log is on the machine that runs it)"

    def engine_error(self) -> str | None:
        return None  # the log is the server's, wherever it runs

    def provenance(self) -> Provenance:
        # A server on this machine runs on this machine's platform; a remote one we cannot see.
        platform_name, device = local_device() if self.is_local else ("unknown", "unknown (remote server)")
        return Provenance(platform=platform_name, device_name=device, vllm_version=self.vllm_version,
                          async_scheduling=False if self.trace else None, server_url=self.url)

    def tokenizer(self):
        return tokenizer_for(self)

    def members(self) -> list[AttachedServer]:
        return [self]

    def views(self, run: Run | None = None) -> list[View]:
        """What specviz can show for this server; `run` (one recorded from it) tells whether vLLM
        sent per-request metrics, which the server's endpoints do not say beforehand."""
        speculating = self.counters is not None
        per_request = None if run is None else any(r.spec_decode_metrics for r in run.requests)
        step_arrays = None if run is None else any(has_step_arrays(r) for r in run.requests)
        step_arrays_why = {
            None: f"known after the first request; needs vLLM started with {STEP_ARRAYS_FLAG} (any scheduler, "
                  "async scheduling on or off)",
            True: "the server sends each request's per-step accepted and drafted counts; specviz places them on "
                  "the streamed tokens (draft texts need the tracer)",
            False: f"the server sent no per-step counts: add {STEP_ARRAYS_FLAG} to its command line (vLLM 0.32 or "
                   "newer)",
        }[step_arrays]
        per_request_why = {
            None: "known after the first request; start vLLM with --per-request-spec-decode-metrics detailed "
                  "(vLLM 0.32 or newer) to get it",
            True: "the server reports it on each request's final chunk",
            False: "the server did not report it: start vLLM with --per-request-spec-decode-metrics detailed "
                   "(vLLM 0.32 or newer)",
        }[per_request]
        if self.trace:
            drafts_why = f"reading the tracer's records from {self.trace_path}"
        elif not self.is_local:
            drafts_why = ("the tracer's records stay on the server's machine: run `python -m specviz record "
                          "--attach ... --trace-file ...` there and open the run file here")
        else:
            drafts_why = ("start vLLM with --scheduler-cls specviz.serving.tracer.TracingScheduler --no-async-scheduling "
                          "and SPECVIZ_TRACE_FILE=<file>, then attach with that trace file")
        return [
            View("tokens committed per step (from the stream)", True,
                 "vLLM streams one chunk per engine step while the client keeps up"),
            View("vLLM's spec-decode counters (/metrics)", speculating,
                 "found on /metrics" if speculating else
                 "no vllm:spec_decode_* counters on /metrics: the server runs without speculative decoding"),
            View("per-request acceptance (vLLM's own)", bool(per_request), per_request_why),
            View(STEP_ARRAYS_VIEW, step_arrays, step_arrays_why),
            View(TRACER_VIEW, self.trace, drafts_why),
        ]


def attach(url: str, *, spec: SpecConfig | None = None, trace_file: str | Path | None = None,
           timeout_s: float = 10) -> AttachedServer:
    """Check that `url` is a healthy vLLM server and learn what it serves; raise AttachError saying why not."""
    url = url.strip().rstrip("/")
    if not urlparse(url).scheme.startswith("http") or not urlparse(url).hostname:
        raise AttachError(f"{url!r} is not a server URL: use the form http://host:port")
    trace_path = None
    if trace_file:
        trace_path = Path(trace_file)
        if not trace_path.is_file():
            raise AttachError(f"trace file {str(trace_path)!r} does not exist on this machine: give the "
                              "SPECVIZ_TRACE_FILE the server was started with, or leave it empty")
    try:
        with httpx.Client(timeout=timeout_s) as client:
            health = client.get(f"{url}/health")
            listing = client.get(f"{url}/v1/models")
            version = client.get(f"{url}/version")
            models = _listed_models(_json_or_none(listing))
            reported = _json_or_none(version)
            vllm_version = reported.get("version") if isinstance(reported, dict) else None
            # What every vLLM OpenAI server answers: /v1/models in its shape, and /version or /tokenize.
            tokenizes = models and _tokenizes(client, url, models[0]["id"])
            if models is None or not (isinstance(vllm_version, str) or tokenizes):
                raise AttachError(NOT_VLLM.format(url=url, why=_missing(listing, version, models)))
            if health.status_code != 200:
                raise AttachError(f"{url}/health answered HTTP {health.status_code}: the vLLM server is not ready "
                                  "(still loading, or its engine died: see the server's log)")
            metrics = client.get(f"{url}/metrics")
    except httpx.HTTPError as e:
        raise AttachError(f"cannot reach a vLLM server at {url}: {e}. Is it running, and is the port right?") from e
    if not models:
        raise AttachError(f"{url}/v1/models lists no model")
    first = models[0]
    model_root = first.get("root") if isinstance(first.get("root"), str) else first["id"]
    if not tokenizes and not Path(model_root).is_dir():
        raise AttachError(f"{url} does not answer POST /tokenize, and the model it serves ({model_root}) is not a "
                          "folder on this machine: specviz needs one of the two for the chat template and the token "
                          "texts. Attach from the server's machine, or to a server with vLLM's /tokenize")
    try:
        counters = parse_spec_counters(metrics.text) if metrics.status_code == 200 else None
    except (ValueError, KeyError):  # a /metrics page that is not Prometheus text: no counters to read
        counters = None
    if spec is not None and counters is None:
        raise AttachError(f"you gave a speculative config, but {url}/metrics has no spec-decode counters: the "
                          "server runs without speculative decoding")
    max_model_len = first.get("max_model_len")
    server = AttachedServer(
        url=url, model=first["id"], model_root=model_root, vllm_version=vllm_version or "unknown",
        max_model_len=max_model_len if isinstance(max_model_len, int) else None, counters=counters,
        spec=spec or spec_from_counters(counters), trace_path=trace_path,
    )
    if trace_path is not None and server.num_speculative_tokens is None and counters is not None:
        raise AttachError("give the server's speculative config (--spec) to read its trace")
    return server


def _tokenizes(client: httpx.Client, url: str, model: str) -> bool:
    """Whether POST /tokenize answers as vLLM's does ({"tokens": [...], ...})."""
    try:
        body = _json_or_none(client.post(f"{url}/tokenize", json={"model": model, "prompt": "a"}))
    except httpx.HTTPError:
        return False
    return isinstance(body, dict) and isinstance(body.get("tokens"), list)


def _missing(listing: httpx.Response, version: httpx.Response, models: list[dict] | None) -> str:
    """What a server lacks of vLLM's endpoints, for NOT_VLLM: 'GET /v1/models answered HTTP 404, ...'."""
    def said(name: str, r: httpx.Response) -> str:
        return f"{name} answered HTTP {r.status_code}" if r.status_code != 200 else f"{name} is not vLLM's answer"
    if models is None:
        return said("GET /v1/models", listing)
    return f"it lists models, but {said('GET /version', version)} and POST /tokenize gave no tokens"


def spec_from_counters(counters: SpecDecodeCounters | None) -> SpecConfig | None:
    """What /metrics says of a server's drafting when nobody gave its config: k is the length of vLLM's
    per-position accepted counter (positions 0..k-1), the method is not reported. None when the server
    does not speculate, or its counters do not show k.

        num_accepted_tokens_per_pos [12, 7, 3] -> SpecConfig(method=UNREPORTED_METHOD, num_speculative_tokens=3)
    """
    if counters is None or not counters.num_accepted_tokens_per_pos:
        return None
    return SpecConfig(method=UNREPORTED_METHOD, num_speculative_tokens=len(counters.num_accepted_tokens_per_pos))


class ServerTokenizer:
    """The tokenizer of an attached server, through its /tokenize and /detokenize endpoints.

    Used when the served checkpoint is not on this machine: enough for the chat template and for
    showing token texts, which is all specviz needs.
    """

    chat_template = True

    def __init__(self, server: AttachedServer) -> None:
        self.server = server
        self._client = httpx.Client(timeout=30)

    def apply_chat_template(self, messages: list[dict], tokenize: bool = False,
                            add_generation_prompt: bool = True) -> str:
        body = self._post("/tokenize", {"model": self.server.model, "messages": messages,
                                        "add_generation_prompt": add_generation_prompt}, "tokens")
        return self.decode(body["tokens"])

    def decode(self, token_ids: list[int]) -> str:
        return self._post("/detokenize", {"model": self.server.model, "tokens": token_ids}, "prompt")["prompt"]

    def _post(self, path: str, payload: dict, field: str) -> dict:
        """The JSON answer of an endpoint, or EndpointError saying which one failed and how (never httpx's own)."""
        url = f"{self.server.url}{path}"
        try:
            r = self._client.post(url, json=payload)
        except httpx.HTTPError as e:
            raise EndpointError(f"{url} did not answer: {e}") from e
        body = _json_or_none(r)
        if not isinstance(body, dict) or field not in body:
            why = f"HTTP {r.status_code}" if r.status_code != 200 else f"JSON without {field!r}"
            raise EndpointError(f"{url} answered {why}: specviz needs vLLM's {path} for the chat template and token "
                                "texts when the model is not on this machine (--no-chat-template skips the template)")
        return body


def tokenizer_for(server: AttachedServer):
    """The served checkpoint's own tokenizer when it is on this machine, else the server's endpoints."""
    if Path(server.model_root).is_dir():
        from .recording import load_tokenizer

        return load_tokenizer(server.model_root)
    return ServerTokenizer(server)


@dataclass(eq=False)
class ServerGroup:
    """Several servers serving the same model (several ROCm nodes, or replicas behind no router):
    a run sends its requests to them round-robin and adds up their counters.

    Each member is attached on its own, so each keeps its own views and trace file.
    """

    servers: list[AttachedServer]

    def members(self) -> list[AttachedServer]:
        return self.servers

    @property
    def url(self) -> str:
        return ",".join(s.url for s in self.servers)

    @property
    def model(self) -> str:
        return self.servers[0].model

    @property
    def trace(self) -> bool:
        return self.servers[0].trace  # all members alike: attach_many checks

    @property
    def spec(self) -> SpecConfig | None:
        return self.servers[0].spec

    def tokenizer(self):
        return self.servers[0].tokenizer()

    def alive(self) -> bool:
        return all(s.alive() for s in self.servers)

    def log_tail(self, n: int = 30) -> str:
        return self.servers[0].log_tail(n)

    def engine_error(self) -> str | None:
        return None  # attached servers' logs are not here

    def views(self, run: Run | None = None) -> list[View]:
        return self.servers[0].views(run)

    def provenance(self) -> Provenance:
        each = [s.provenance() for s in self.servers]

        def agreed(values: list[str]) -> str:
            return values[0] if len(set(values)) == 1 else " / ".join(dict.fromkeys(values))

        return Provenance(platform=agreed([p.platform for p in each]), device_name=agreed([p.device_name for p in each]),
                          vllm_version=agreed([p.vllm_version for p in each]),
                          async_scheduling=each[0].async_scheduling, server_url=self.url)


def attach_many(urls: list[str], *, spec: SpecConfig | None = None,
                trace_files: list[str | Path | None] | None = None) -> AttachedServer | ServerGroup:
    """attach() each URL; one URL gives that server, several give a ServerGroup.

    Refuses members that serve different models or speculate differently (k), and a mix of traced
    and untraced members, since the run's figures would then mix unlike things.
    """
    urls = [u.strip().rstrip("/") for u in urls if u.strip()]
    if not urls:
        raise AttachError("no server URL given")
    if len(set(urls)) != len(urls):
        raise AttachError("a server URL is given twice: its counters would be counted twice")
    trace_files = trace_files or [None] * len(urls)
    if len(trace_files) != len(urls):
        raise AttachError(f"{len(urls)} URLs but {len(trace_files)} trace files: give one per server, or none")
    servers = [attach(u, spec=spec, trace_file=t) for u, t in zip(urls, trace_files)]
    if len(servers) == 1:
        return servers[0]
    first = servers[0]
    for s in servers[1:]:
        if s.model != first.model:
            raise AttachError(f"{s.url} serves {s.model!r} but {first.url} serves {first.model!r}: "
                              "a run's servers must serve the same model")
        if s.num_speculative_tokens != first.num_speculative_tokens:
            raise AttachError(f"{s.url} drafts k={s.num_speculative_tokens} but {first.url} drafts "
                              f"k={first.num_speculative_tokens}: start them with the same speculative config")
        if s.trace != first.trace:
            raise AttachError("give a trace file for every server or for none")
    return ServerGroup(servers)
