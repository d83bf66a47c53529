"""What every vLLM server specviz records from offers, and where it runs.

Three kinds implement `Server`: a `LocalServer` specviz starts (serving.local), an
`AttachedServer` it did not start, and a `ServerGroup` of several attached ones behind one
workflow (serving.attached). `record`, `build_run` and `LiveGeneration` take any of them.

    server.members()   -> [server]              (a group: its members, requests go round-robin)
    server.provenance() -> Provenance(platform="cpu", device_name="AMD EPYC ...", vllm_version="0.32.0", ...)
"""

from __future__ import annotations

import platform as py_platform
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Protocol, runtime_checkable

from ..base import SpecvizError
from ..config import SpecConfig
from ..platforms import detect_platform


class EngineError(SpecvizError, RuntimeError):
    """The engine could not start or died; the message carries the log tail."""


@runtime_checkable
class Server(Protocol):
    """A running vLLM OpenAI-compatible server, as record() and the live views use it.

    members() are single servers (LocalServer or AttachedServer), each with a `trace_path`: the
    tracer's file when this machine can read it.
    """

    url: str
    model: str  # the name requests are sent with (a folder for a local server, the served name otherwise)
    spec: SpecConfig | None  # the drafting it serves, as a run records it (None: no drafting)

    @property
    def trace(self) -> bool: ...  # True when this machine can read the server's tracer records

    def members(self) -> list: ...  # the single servers behind this one (itself, or a group's members)

    def alive(self) -> bool: ...

    def log_tail(self, n: int = 30) -> str: ...

    def engine_error(self) -> str | None: ...  # the engine's own error from its log, when this machine has it

    def provenance(self) -> Provenance: ...

    def tokenizer(self): ...


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
    dtype: str | None = None  # the target's dtype as vLLM's log states it ('float32', 'bfloat16'); None if unknown


def vllm_version() -> str:
    try:
        from vllm import __version__ as v
    except ImportError:
        return "unknown"
    return v

