"""Reading specviz's own files (runs, sweeps, method trials): capped, gzip-aware, kind- and version-checked.

    doc = read_versioned_json("runs/ngram.json.gz", kind="specviz.run", versions=(1, 2), error=RunFileError,
                              label="run")
    -> the parsed JSON object, its "kind" and "schema_version" checked; then the caller validates it

Every file is read through `read_capped`, which refuses more than `max_file_bytes()` once inflated
(SPECVIZ_MAX_RUN_MB, default 256 MiB), so a gzip bomb is refused without being held in memory.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import zlib
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any, NamedTuple

from .base import SpecvizError

REPO_DIR = Path(__file__).resolve().parent.parent  # the checkout: sample_runs/, drafters/, .cache/, scripts/
SAMPLE_RUNS_DIR = REPO_DIR / "sample_runs"

MAX_RUN_MB_ENV = "SPECVIZ_MAX_RUN_MB"  # the largest run/sweep file specviz reads, inflated, in MiB
DEFAULT_MAX_RUN_MB = 256  # see max_file_bytes()

MAX_RUN_STEPS_ENV = "SPECVIZ_MAX_RUN_STEPS"  # the most step records one run file may hold (see max_run_steps)
DEFAULT_MAX_RUN_STEPS = 100_000

_GZIP_MAGIC = b"\x1f\x8b"
_CHUNK = 256 << 10  # inflate this much at a time


def max_file_bytes() -> int:
    """The largest file specviz reads, counted inflated: SPECVIZ_MAX_RUN_MB (MiB), default 256 MiB.

    A recorded run takes about 200 bytes of JSON per output token (steps, stream chunks, token
    texts): a concurrency-64 run of 64 x 512 tokens is about 7 MB, and 256 MiB holds about 1.3
    million tokens (2,500 requests of 512 tokens). Parsing costs about ten times the file's size in
    memory (6 MiB of run JSON took 66 MiB), so a shared deployment may want a lower cap.
    """
    text = os.environ.get(MAX_RUN_MB_ENV, "").strip()
    if not text:
        return DEFAULT_MAX_RUN_MB << 20
    try:
        mib = float(text)
    except ValueError:
        mib = -1.0
    if not mib > 0 or mib == float("inf"):
        raise ValueError(f"{MAX_RUN_MB_ENV}={text!r} is not a positive number of MiB")
    return int(mib * (1 << 20))


def max_run_steps() -> int:
    """The most step records (engine steps, stream chunks and vLLM's per-step counts, together) one run file may
    hold: SPECVIZ_MAX_RUN_STEPS, default 100,000.

    What a visitor's upload may cost is set by its records, not its bytes: one request of 200,000 one-token steps
    is 1.7 MB gzipped, inside the size cap, but took 5.7 s and 722 MB to check and 45 s to draw before this cap.
    A run records at most about two per output token (a step and a chunk), so 100,000 holds a concurrency-64
    run of 64 x 512 tokens (65,536 records at most); the sample runs hold at most 1,600 steps.
    """
    text = os.environ.get(MAX_RUN_STEPS_ENV, "").strip()
    if not text:
        return DEFAULT_MAX_RUN_STEPS
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise ValueError(f"{MAX_RUN_STEPS_ENV}={text!r} is not a positive whole number of step records")
    return n


def too_many_steps(name: str, found: int, cap: int) -> str:
    """The refusal of a run over max_run_steps(), saying how to raise the cap."""
    return (f"{name}: holds {found:,} step records (engine steps, stream chunks and per-step counts); specviz reads "
            f"at most {cap:,} per run ({MAX_RUN_STEPS_ENV}), so that no file costs the app more than that to open. "
            f"If it is a real run, raise the limit, e.g. {MAX_RUN_STEPS_ENV}={max(2 * found, cap)} before "
            "`python -m specviz` or `streamlit run`")


def _size(n: int) -> str:
    return f"{n / (1 << 20):,.1f} MiB" if n >= 1 << 20 else f"{n / 1024:,.1f} KiB"


def _source_name(source: str | Path | bytes) -> str:
    return "<uploaded>" if isinstance(source, (bytes, bytearray)) else str(source)


def read_capped(source: str | Path | bytes, *, name: str | None = None,
                error: type[Exception] = SpecvizError) -> bytes:
    """The bytes of a file, or of file contents, gunzipped if they start with gzip's magic bytes,
    refusing more than max_file_bytes(): a plain file's size is checked before it is read, gzip
    data is first inflated without keeping it and stops as soon as it passes the cap (a gzip bomb
    costs one chunk of memory), then inflated again into memory.

    OSError (missing, unreadable) propagates; too large, or corrupt gzip data, raises `error`.
    """
    name = name or _source_name(source)
    try:
        cap = max_file_bytes()
    except ValueError as e:
        raise error(f"{name}: {e}") from None

    def too_big(what: str, need: int = 0) -> Exception:
        suggest = max(1024, 4 * (cap >> 20), 2 * (-(-need >> 20)))
        return error(f"{name}: {what}; specviz reads at most {_size(cap)} ({MAX_RUN_MB_ENV}). If it is a real "
                     f"run or sweep, raise the limit with that environment variable (in MiB), e.g. "
                     f"{MAX_RUN_MB_ENV}={suggest} before `python -m specviz` or `streamlit run`")

    in_memory = isinstance(source, (bytes, bytearray))
    with (io.BytesIO(source) if in_memory else open(source, "rb")) as f:
        size = len(source) if in_memory else os.fstat(f.fileno()).st_size
        head = bytes(source[:2]) if in_memory else f.peek(2)[:2]
        if head != _GZIP_MAGIC:
            if size > cap:
                raise too_big(f"is {_size(size)}", size)
            data = source if in_memory else f.read(cap + 1)  # not a regular file: st_size says nothing
            if len(data) > cap:
                raise too_big(f"is more than {_size(cap)}")
            return data
        try:
            if f.seekable():  # measure first, keeping nothing
                with gzip.GzipFile(fileobj=f, mode="rb") as g:
                    n = 0
                    while n <= cap and (chunk := g.read(_CHUNK)):
                        n += len(chunk)
                if n > cap:
                    raise too_big(f"inflates to more than {_size(cap)} from {_size(size)} of gzip data "
                                  "(decompression stopped there)")
                f.seek(0)
            out = bytearray()
            with gzip.GzipFile(fileobj=f, mode="rb") as g:
                while chunk := g.read(min(_CHUNK, cap + 1 - len(out))):
                    out += chunk
                    if len(out) > cap:  # the file grew since it was measured, or could not be measured
                        raise too_big(f"inflates to more than {_size(cap)}")
        except (OSError, EOFError, zlib.error) as e:
            raise error(f"{name}: corrupt or truncated gzip data ({e})") from e
        return out


class Wording(NamedTuple):
    """How read_versioned_json words each refusal. Fields a template may use: {name} (the file's name
    as shown), {source} (its path), {reason} (the OS's words), {error} (the exception), {label}
    ("run", "sweep", ...), {kind} (the expected kind), {found} (the file's kind), {version} (the
    file's schema_version), {versions} (the readable versions, comma-separated)."""

    missing: str = "{name}: cannot read: {reason}"
    unreadable: str = "{name}: cannot read: {reason}"
    not_json: str = "{name}: not JSON, or truncated ({error})"
    wrong_kind: str = '{name}: not a specviz {label} file (expected "kind": "{kind}")'
    wrong_version: str = "{name}: schema_version {version!r}; this specviz reads versions {versions}"


STANDARD_WORDING = Wording()


def read_versioned_json(source: str | Path | bytes, *, kind: str, versions: Collection[int] | None,
                        error: type[Exception], label: str, name: str | None = None,
                        wording: Wording = STANDARD_WORDING,
                        check_raw: Callable[[bytes], None] | None = None) -> dict[str, Any]:
    """Read a specviz file (a path or a file's bytes; gzip or plain, capped), parse it and check that its
    "kind" is `kind` and, unless `versions` is None, that its "schema_version" is one of `versions`.

    Returns the JSON object for the caller to validate; every refusal raises `error` with a message
    that starts with the file's name (`name`, default: the path, or "<uploaded>" for bytes).
    `check_raw` sees the (inflated) bytes before they are parsed, to refuse what parsing would make expensive.
    """
    name = name or _source_name(source)
    words: dict[str, Any] = {"name": name, "source": _source_name(source), "label": label, "kind": kind}
    try:
        raw = read_capped(source, name=name, error=error)
    except FileNotFoundError as e:
        raise error(wording.missing.format(**words, reason=e.strerror or e, error=e)) from e
    except OSError as e:
        raise error(wording.unreadable.format(**words, reason=e.strerror or e, error=e)) from e
    if check_raw is not None:
        check_raw(raw)
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise error(wording.not_json.format(**words, error=e)) from e
    found = doc.get("kind") if isinstance(doc, dict) else None
    if found != kind:
        raise error(wording.wrong_kind.format(**words, found=found))
    if versions is not None and (version := doc.get("schema_version")) not in versions:
        raise error(wording.wrong_version.format(**words, version=version, versions=", ".join(map(str, versions))))
    return doc


def first_error(e) -> str:
    """Where and what a pydantic ValidationError's first error is: 'at requests.0.steps.1: Value error, ...'."""
    first = e.errors()[0]
    return f"at {'.'.join(str(p) for p in first['loc']) or 'top level'}: {first['msg']}"
