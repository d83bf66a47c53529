"""The tracer's records: read them as they are written, and join them to the client's requests.

The tracer (serving.tracer) appends one JSON line per engine step to the file named by
SPECVIZ_TRACE_FILE, and a line {"dropped_steps": n, ...} when its writer fell behind and dropped n
steps; see its docstring for the format. Files of earlier tracers (committed tokens as ids, four
fields per request) read the same.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from ..runfile import Step

TRACE_FILE_ENV = "SPECVIZ_TRACE_FILE"  # where serving.tracer appends its step records (JSON lines)
TRACE_MAX_MB_ENV = "SPECVIZ_TRACE_MAX_MB"  # past this size the tracer rotates its file to "<file>.1"
TRACE_QUEUE_STEPS_ENV = "SPECVIZ_TRACE_QUEUE_STEPS"  # steps the tracer's writer may fall behind before dropping
DROPPED_STEPS_KEY = "dropped_steps"  # the key of the line that counts steps the tracer's writer dropped


class TraceReader:
    """Reads the tracer's JSON-lines file incrementally; a half-written last line waits for the next read.

    Follows the tracer's rotation (SPECVIZ_TRACE_MAX_MB): when the file it was reading has become
    "<file>.1", it reads the rest of that one, then the new file from its start. Returns step records
    only: the lines that count dropped steps add to `num_dropped_steps` (since this reader started).
    """

    TAIL_BYTES = 1 << 16  # from_end looks this far back for the last whole line

    def __init__(self, path: Path, from_end: bool = False) -> None:
        self.path = Path(path)
        self._offset = 0
        self._inode: int | None = None
        self.num_dropped_steps = 0
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
        records = [json.loads(line) for line in data.splitlines() if line.strip()]
        if not any(DROPPED_STEPS_KEY in rec for rec in records):
            return records
        self.num_dropped_steps += sum(rec.get(DROPPED_STEPS_KEY, 0) for rec in records)
        return [rec for rec in records if DROPPED_STEPS_KEY not in rec]

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


def committed_count(committed: int | list[int]) -> int:
    """How many tokens a record's entry committed: the tracer writes the count, earlier tracers the ids."""
    return committed if isinstance(committed, int) else len(committed)


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
        for entry in rec.get("reqs", ()):  # a line counting dropped steps has none
            engine_id, drafts, sampled, committed = entry[:4]
            if isinstance(committed, int):  # how many of the sampled tokens; earlier tracers wrote the ids
                committed = sampled[:committed]
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


def placeholder_only_reason(records: list[dict]) -> str | None:
    """Why a trace is useless, when every decode step verified placeholders only (V2 runner, async scheduling).

    vLLM pads a request's first step at most once per admission, so a few padded steps are normal;
    a trace in which every decode step (a request's entries after its first) had padding and no
    real draft was recorded where the scheduler never sees the drafts.
    """
    seen: set[str] = set()
    decode_entries = []
    for rec in records:
        for entry in rec.get("reqs", ()):
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

