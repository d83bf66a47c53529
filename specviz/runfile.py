"""The run file: what one recording of vLLM speculative decoding contains.

A `Run` is plain data: metadata, then per request its steps. One `Step` is one engine step
(one target forward pass) as seen by one request:

    prompt "The weather today is", drafts  [sunny, and, warm, outside]
    the target samples                     [sunny, and, clear]      -> num_accepted = 2
    accepted prefix  = drafts[:2]          = [sunny, and]
    correction       = sampled[2]          = clear   (the target's token in place of "warm")
    discarded tail   = drafts[3:]          = [outside]
    committed        = sampled             = 3 tokens for one target pass

When every draft is accepted the last sampled token is the bonus token. A step without drafts
(prefill, or a drafter that found nothing) samples one token. `committed_token_ids` is the part
of `sampled_token_ids` that joined the output: shorter only when the request stopped inside the
step (max_tokens or a stop token), which vLLM still counts as accepted in its own counters.

Files are JSON, optionally gzip-compressed (by the `.gz` suffix on save, by magic bytes on load).
"""

from __future__ import annotations

import gzip
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, ValidationInfo, model_validator

from .base import Frozen, SpecvizError
from .config import DraftingFacts, SpecConfig
from .files import SAMPLE_RUNS_DIR, first_error, max_run_steps, read_versioned_json, too_many_steps

# 4: the drafting is one typed spec (meta.spec); 3: the target's top logprobs per output token and the dtype;
# 2: padded slots. 1-3 still read.
SCHEMA_VERSION = 4
READABLE_SCHEMA_VERSIONS = (1, 2, 3, 4)
RUN_FILE_KIND = "specviz.run"


# Validation context of a run the recorder (or the reader) found invalid: types are checked, invariants are not,
# so its steps are kept as recorded. A file never chooses it: load_run checks every file's invariants first.
LENIENT = {"lenient": True}


def _lenient(info: ValidationInfo) -> bool:
    return bool(info.context and info.context.get("lenient"))


class Step(Frozen):
    """One engine step of one request."""

    engine_step: int = Field(ge=0, description="index of the engine step in the server's life")
    time_s: float = Field(description="unix time when the scheduler saw the target's output")
    draft_token_ids: list[int] = Field(description="drafts the target verified; [] if none")
    sampled_token_ids: list[int] = Field(min_length=1, description="accepted drafts + correction or bonus")
    committed_token_ids: list[int] = Field(description="prefix of sampled_token_ids appended to the output")
    num_accepted: int = Field(ge=0, description="len(sampled) - 1 when drafts were verified, else 0")
    num_padded_drafts: int = Field(
        default=0, ge=0, description="placeholder draft slots vLLM padded this step with (no drafter proposed "
                                     "them); vLLM counts them as drafted and rejected")
    draft_texts: list[str] = Field(default_factory=list, description="decoded drafts, for display")
    sampled_texts: list[str] = Field(default_factory=list, description="decoded sampled tokens, for display")

    @model_validator(mode="after")
    def _check(self, info: ValidationInfo) -> Step:
        if _lenient(info):
            return self
        k = len(self.draft_token_ids)
        if any(t < 0 for t in self.draft_token_ids):
            raise ValueError("draft_token_ids contains placeholder ids (<0): async scheduling was on")
        if self.num_accepted > k:  # padded slots are never accepted: only real drafts can be
            raise ValueError(f"num_accepted={self.num_accepted} > number of drafts {k}")
        if len(self.sampled_token_ids) != self.num_accepted + 1:
            raise ValueError(
                f"sampled {len(self.sampled_token_ids)} tokens but num_accepted={self.num_accepted}: "
                "a step samples the accepted drafts plus one token"
            )
        if self.sampled_token_ids[: self.num_accepted] != self.draft_token_ids[: self.num_accepted]:
            raise ValueError("the accepted prefix of sampled_token_ids differs from the drafts")
        if self.sampled_token_ids[: len(self.committed_token_ids)] != self.committed_token_ids:
            raise ValueError("committed_token_ids is not a prefix of sampled_token_ids")
        for name, texts, ids in (
            ("draft_texts", self.draft_texts, self.draft_token_ids),
            ("sampled_texts", self.sampled_texts, self.sampled_token_ids),
        ):
            if texts and len(texts) != len(ids):
                raise ValueError(f"{name} has {len(texts)} entries for {len(ids)} tokens")
        return self

    @property
    def num_drafts(self) -> int:
        return len(self.draft_token_ids)

    @property
    def verified(self) -> bool:
        """True when vLLM counts this step as a draft (real drafts or padded slots were verified)."""
        return bool(self.draft_token_ids) or self.num_padded_drafts > 0

    @property
    def all_accepted(self) -> bool:
        """True when the last sampled token is a bonus token (every draft accepted)."""
        return (bool(self.draft_token_ids) and self.num_accepted == len(self.draft_token_ids)
                and not self.num_padded_drafts)


class StreamChunk(Frozen):
    """One streamed chunk as the client saw it: vLLM sends one per engine step while the client keeps up."""

    time_s: float
    token_ids: list[int]
    text: str


class RequestSpecDecodeMetrics(Frozen):
    """vLLM's own per-request acceptance figures (`--per-request-spec-decode-metrics`), as the server sent them.

    acceptance_histogram[j] = verify steps that accepted exactly j drafts (length k + 1).
    """

    mean_acceptance_length: float
    draft_acceptance_rate: float
    acceptance_histogram: list[int]
    num_spec_steps: int
    num_accepted_draft_tokens: int
    num_draft_tokens: int
    num_spec_tokens: int
    per_step_accepted: list[int] | None = None  # only at the 'detailed' level
    per_step_drafted: list[int] | None = None


class TokenCandidates(Frozen):
    """The target's best candidates at one output position, best first, as vLLM's `logprobs` reported them.

    token_ids=[1734, 2583], logprobs=[-0.61, -0.74]: the target preferred 1734 by 0.13 nats. The
    token the request committed is among them (vLLM adds it when it is not in the top n).
    """

    token_ids: list[int] = Field(min_length=1)
    logprobs: list[float] = Field(min_length=1, description="natural log, same order as token_ids")

    @model_validator(mode="after")
    def _check(self) -> TokenCandidates:
        if len(self.token_ids) != len(self.logprobs):
            raise ValueError(f"{len(self.token_ids)} candidate ids for {len(self.logprobs)} logprobs")
        return self

    def logprob_of(self, token_id: int) -> float | None:
        """The candidate's logprob, or None when the target did not report it at this position."""
        return next((lp for t, lp in zip(self.token_ids, self.logprobs) if t == token_id), None)


class Request(Frozen):
    request_id: str
    prompt: str = Field(description="the prompt text sent to the server (after any chat template)")
    user_message: str | None = Field(default=None, description="the user's text the chat template wrapped")
    prompt_token_ids: list[int] = Field(default_factory=list)
    output_token_ids: list[int]
    output_text: str
    output_token_texts: list[str] = Field(
        default_factory=list, description="each output token decoded, for the step view of a run without the tracer "
                                          "(a traced run has them in its steps); empty if not recorded")
    start_time_s: float = Field(description="unix time the client sent the request")
    first_token_time_s: float | None = None
    end_time_s: float | None = None
    finish_reason: str | None = Field(description="'length', 'stop', 'abort', or None if cut off or failed")
    error: str | None = Field(default=None, description="why the request failed (the server's message), if it did")
    steps: list[Step] = Field(default_factory=list, description="empty when the server had no tracer")
    num_untraced_tokens: int = Field(
        default=0, ge=0, description="output tokens no recorded step commits: the tracer dropped their steps (its "
                                     "writer fell behind: meta.trace_dropped_steps) or the server died before they "
                                     "were written; 0 when the steps rebuild the whole output")
    stream_chunks: list[StreamChunk] = Field(default_factory=list, description="the stream, chunk by chunk")
    spec_decode_metrics: RequestSpecDecodeMetrics | None = Field(
        default=None, description="vLLM's per-request acceptance figures, when the server reports them")
    top_logprobs: list[TokenCandidates] | None = Field(
        default=None, description="per output token, the target's best candidates; None when not recorded")

    @model_validator(mode="after")
    def _check(self, info: ValidationInfo) -> Request:
        if _lenient(info):
            return self
        if self.top_logprobs is not None and len(self.top_logprobs) != len(self.output_token_ids):
            raise ValueError(f"request {self.request_id}: {len(self.top_logprobs)} logprob entries for "
                             f"{len(self.output_token_ids)} output tokens")
        if self.steps:
            committed = [t for s in self.steps for t in s.committed_token_ids]
            if self.num_untraced_tokens:  # steps are missing: the ones kept commit the rest
                if len(committed) + self.num_untraced_tokens != len(self.output_token_ids):
                    raise ValueError(
                        f"request {self.request_id}: the steps commit {len(committed)} tokens and "
                        f"{self.num_untraced_tokens} are untraced, not its {len(self.output_token_ids)} output tokens")
            elif committed != self.output_token_ids:
                raise ValueError(
                    f"request {self.request_id}: the steps commit {len(committed)} tokens that differ "
                    f"from its {len(self.output_token_ids)} output tokens"
                )
        if self.stream_chunks:
            streamed = [t for c in self.stream_chunks for t in c.token_ids]
            if streamed != self.output_token_ids:
                raise ValueError(f"request {self.request_id}: the stream chunks differ from its output tokens")
        engine_steps = [s.engine_step for s in self.steps]
        if engine_steps != sorted(set(engine_steps)):
            raise ValueError(f"request {self.request_id}: engine steps are not strictly increasing")
        return self


class SpecDecodeCounters(Frozen):
    """vLLM's own spec-decode counters for the run (after minus before, from /metrics)."""

    num_drafts: int
    num_draft_tokens: int
    num_accepted_tokens: int
    num_accepted_tokens_per_pos: list[int]


class RunMeta(DraftingFacts, Frozen):
    run_id: str
    created_at: str = Field(description="ISO 8601, UTC")
    specviz_version: str
    vllm_version: str
    platform: str = Field(description="vLLM platform: cpu, rocm, cuda, ... or 'unknown' for a remote server")
    device_name: str = Field(description="e.g. 'AMD Instinct MI300X' or the CPU model")
    attention_backends: list[str] = Field(default_factory=list, description="as vLLM's log names them, if known")
    dtype: str | None = Field(default=None, description="the dtype the target ran in ('float32', 'bfloat16', ...); "
                                                        "None when unknown (an attached server, or a file before v3)")
    async_scheduling: bool | None = Field(description="None when unknown (an attached server without the tracer)")
    traced: bool = Field(description="True when the server ran the specviz tracer")
    server_url: str | None = Field(default=None, description="the attached server; None if specviz started it")
    target_model: str
    spec: SpecConfig | None = Field(description="the drafting the server ran, as vLLM took it (with its per-batch-size "
                                                "schedule, if any); None: no drafting (the baseline)")
    sampling: dict = Field(description="temperature, top_p, seed, ... as sent to the server")
    prompt_set: str
    concurrency: int = Field(ge=1)
    max_tokens: int = Field(ge=1)
    complete: bool = True
    incomplete_reason: str | None = None
    engine_error: str | None = Field(
        default=None, description="the engine's own error (exception and where it was raised) from the server's "
                                  "log, when requests failed on the server or the engine died during the run")
    invalid_reason: str | None = Field(
        default=None, description="the invariant the recording broke; its steps are kept as recorded, unchecked")
    vllm_counters: SpecDecodeCounters | None = None
    trace_dropped_steps: int = Field(
        default=0, ge=0, description="engine steps the tracer's writer dropped because it fell behind (its queue was "
                                     "full): the traces are incomplete, and vLLM's counters count those steps too")
    notes: str = ""

    @model_validator(mode="before")
    @classmethod
    def _read(cls, data):
        """Schema 1-3 held the drafting three times (vLLM's dict, its method, its k): one spec now."""
        return DraftingFacts.from_recorded_fields(data) if isinstance(data, dict) else data


class Run(Frozen):
    kind: Literal["specviz.run"] = RUN_FILE_KIND
    schema_version: Literal[4] = SCHEMA_VERSION
    meta: RunMeta
    requests: list[Request]
    raw_trace_records: list[dict] | None = Field(
        default=None, description="the tracer's records as written, kept when the run is invalid")

    @model_validator(mode="before")
    @classmethod
    def _read(cls, data):
        """An older file reads in today's shape (RunMeta._read), so it is written back as schema 4."""
        if isinstance(data, dict) and data.get("schema_version") in READABLE_SCHEMA_VERSIONS:
            data = data | {"schema_version": SCHEMA_VERSION}
        return data

    @model_validator(mode="after")
    def _check(self, info: ValidationInfo) -> Run:
        if _lenient(info):
            return self
        ids = [r.request_id for r in self.requests]
        if len(ids) != len(set(ids)):
            raise ValueError("request ids are not unique")
        if self.meta.complete and self.meta.incomplete_reason:
            raise ValueError("a complete run has no incomplete_reason")
        untraced = next((r for r in self.requests if r.num_untraced_tokens), None)
        if untraced and self.meta.complete and not self.meta.trace_dropped_steps:  # nothing lost without a count
            raise ValueError(f"request {untraced.request_id} has {untraced.num_untraced_tokens} untraced tokens in a "
                             "complete run whose tracer dropped no step")
        spec = self.meta.spec
        if spec is None:
            if any(s.draft_token_ids or s.num_padded_drafts for r in self.requests for s in r.steps):
                raise ValueError("a baseline run (no drafting: meta.spec is null) has steps with drafts or padded "
                                 "draft slots")
            return self
        k = spec.num_speculative_tokens
        batches = draft_batches(self.requests) if spec.schedule else {}
        for r in self.requests:
            for i, (s, batch) in enumerate(zip(r.steps, batches.get(r.request_id) or [None] * len(r.steps))):
                if s.num_drafts + s.num_padded_drafts > k:
                    raise ValueError(
                        f"request {r.request_id} step {s.engine_step} has {s.num_drafts} drafts and "
                        f"{s.num_padded_drafts} padded slots, more than num_speculative_tokens={k}"
                    )
                if batch is not None and s.num_drafts > (allowed := most_drafts_from(spec, batch)):
                    raise ValueError(
                        f"request {r.request_id} step {s.engine_step} verified {s.num_drafts} drafts, proposed in "
                        f"engine step {r.steps[i - 1].engine_step} with {batch} of the run's requests in the batch, "
                        f"where the schedule ({spec.describe()}) drafts at most {allowed}")
        return self


def draft_batches(requests: Sequence[Request]) -> dict[str, list[int | None]]:
    """Per request, per step: the batch its drafts were proposed at, as the run's steps show it; None for its
    first step (nothing drafted before it).

    vLLM's drafter proposes a request's next drafts during the engine step that just ran it, with the k of that
    step's batch (num_spec_tokens_to_schedule in vllm/v1/core/sched/scheduler.py), and the next step verifies
    them. So a step's drafts belong to the batch of the request's previous step:

        r0 at engine steps 5, 6, 7 and r1 at 6, 7       batches {5: 1, 6: 2, 7: 2}
        -> r0: [None, 1, 2]   (what r0 verifies at step 6 was proposed at step 5, when it ran alone)
           r1: [None, 2]

    The count is a lower bound of vLLM's batch: a request in the middle of a chunked prefill samples nothing and
    leaves no record, nor do other clients' requests on the same server. An engine step is its number and its
    time together (the tracer writes one time per step), so the steps of a group's servers, each numbering its
    own, are not counted as one.
    """
    per_step = Counter((s.engine_step, s.time_s) for r in requests for s in r.steps)
    return {r.request_id: [None] + [per_step[s.engine_step, s.time_s] for s in r.steps[:-1]] for r in requests}


def most_drafts_from(spec: SpecConfig, batch: int) -> int:
    """The most drafts per request the spec allows at a batch of `batch` requests or more: the batch a run's steps
    show may be smaller than vLLM's (draft_batches), never larger. For the usual schedule, whose k falls as the
    batch grows, that is k_at(batch):

        1: k=4 · 2-64: k=1         batch 1 -> 4, batch 3 -> 1
        1: k=1 · 2-8: k=4          batch 1 -> 4 (a second request may have been in its prefill), batch 3 -> 4
    """
    if not spec.schedule:
        return spec.num_speculative_tokens
    return max(spec.k_at(b) for b in [batch, *(e.first for e in spec.schedule if e.first > batch)])


class RunFileError(SpecvizError, ValueError):
    """A run file that cannot be read: corrupt, truncated, foreign or invalid. The message says why."""


def save_run(run: Run, path: str | Path) -> Path:
    """Write `run` as JSON (gzip if the name ends in .gz) atomically: a crash never leaves half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    tmp.write_bytes(run_bytes(run, gz=path.suffix == ".gz"))
    tmp.replace(path)
    return path


def run_bytes(run: Run, gz: bool = True) -> bytes:
    """The run file's bytes (for a download button, or save_run)."""
    data = run.model_dump_json().encode()
    return gzip.compress(data, mtime=0) if gz else data


def load_run(source: str | Path | bytes) -> Run:
    """Read a run from a path or from the bytes of a file; raise RunFileError saying what is wrong."""
    name = "<uploaded>" if isinstance(source, bytes) else str(source)
    try:
        cap = max_run_steps()
    except ValueError as e:
        raise RunFileError(f"{name}: {e}") from None

    def few_enough_records(raw: bytes) -> None:
        # Before parsing (parsing costs ten times the JSON's size): every step and stream chunk has a "time_s" key,
        # and that text can only be a key (a string's quotes are escaped). Whitespace before the colon escapes this
        # count; the exact count after parsing does not.
        if (found := raw.count(b'"time_s":')) > cap:
            raise RunFileError(too_many_steps(name, found, cap))

    doc = read_versioned_json(source, kind=RUN_FILE_KIND, versions=READABLE_SCHEMA_VERSIONS, error=RunFileError,
                              label="run", name=name, check_raw=few_enough_records)
    if (found := _step_records(doc)) > cap:
        raise RunFileError(too_many_steps(name, found, cap))
    try:
        return Run.model_validate(doc)  # every file's invariants, whatever its meta says about itself
    except ValidationError as e:
        broken = e
    meta = doc.get("meta")
    claimed = meta.get("invalid_reason") if isinstance(meta, dict) else None
    if not (isinstance(claimed, str) and claimed.strip()):
        raise RunFileError(f"{name}: invalid run file {first_error(broken)}") from broken
    # The recorder saved it marked invalid, with its steps as recorded: read them for inspection (types checked),
    # under the violation this reader found, not only the one the file states.
    try:
        run = Run.model_validate(doc, context=LENIENT)
    except ValidationError as e:
        raise RunFileError(f"{name}: invalid run file {first_error(e)}") from e
    found = broken.errors()[0]["msg"]
    if found in claimed:  # the recorder's own words (first_error of the same check)
        return run
    reason = f"the reader finds it breaks an invariant {first_error(broken)} (the file's own reason: {claimed})"
    return run.model_copy(update={"meta": run.meta.model_copy(update={"invalid_reason": reason})})


def _step_records(doc: dict) -> int:
    """Steps, stream chunks and vLLM's per-step counts in a parsed run file (not yet validated: any shape)."""
    def length(node, key: str) -> int:
        value = node.get(key) if isinstance(node, dict) else None
        return len(value) if isinstance(value, list) else 0

    requests = doc.get("requests")
    return sum(length(r, "steps") + length(r, "stream_chunks")
               + length(r.get("spec_decode_metrics"), "per_step_accepted") for r in requests if isinstance(r, dict)
               ) if isinstance(requests, list) else 0


def run_json_schema() -> dict:
    """The JSON Schema of a run file (written to sample_runs/run.schema.json)."""
    return Run.model_json_schema()


def list_run_files(folder: Path = SAMPLE_RUNS_DIR) -> list[Path]:
    """Run files in a folder and its subfolders (one level: sample_runs/drafters/), by path.

    Other JSON there (a schema, method trials, a sweep file) is left out; a sweep's own runs sit two
    levels down (sweeps/NAME/runs/) and belong to the throughput pages.
    """
    files = [p for pattern in ("*.json", "*.json.gz", "*/*.json", "*/*.json.gz") for p in folder.glob(pattern)]
    return sorted(p for p in files if _starts_like_a_run(p))


def _starts_like_a_run(path: Path) -> bool:
    """specviz writes `kind` first, so a run file's first bytes say what it is (no full parse)."""
    try:
        with (gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")) as f:
            head = f.read(64)
    except (OSError, EOFError):
        return True  # let load_run report what is wrong with it
    return b'"kind":"specviz.run"' in head.replace(b" ", b"")
