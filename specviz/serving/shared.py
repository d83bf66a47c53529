"""One local engine shared by every browser session of the app.

A session asks for an engine configuration; if another session started the running engine with a
different configuration and used it recently, the request is refused with the running
configuration named, instead of restarting the engine under the other session's feet.

    shared = SharedEngine()
    server = shared.ensure(EngineConfig(model=m, spec=s), session_id="abc", progress=cb)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ..base import Frozen, SpecvizError
from ..config import SpecConfig
from ..demo_model import default_dtype
from .local import LocalServer

IDLE_AFTER_S = 600  # a session that has not used the engine for this long no longer holds it


class EngineConfig(Frozen):
    model: str
    spec: SpecConfig | None = None
    dtype: str | None = None  # None: demo_model.default_dtype
    max_model_len: int = 2048

    def describe(self) -> str:
        spec = "no speculation" if self.spec is None else (
            f"{self.spec.method}, k={self.spec.num_speculative_tokens}"
            + (f", draft {self.spec.model}" if self.spec.model else ""))
        return f"{self.model} ({spec}; {self.dtype or default_dtype(self.model)})"


class EngineBusy(SpecvizError, RuntimeError):
    """Another session is using the engine with another configuration."""


class SharedEngine:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.server: LocalServer | None = None
        self.config: EngineConfig | None = None
        self.owner: str | None = None
        self.last_used: dict[str, float] = {}

    def running(self) -> EngineConfig | None:
        return self.config if self.server is not None and self.server.alive() else None

    def ensure(self, config: EngineConfig, session_id: str, *, progress: Callable[[float, str], None] | None = None,
               on_server: Callable[[LocalServer], None] | None = None) -> LocalServer:
        """Return a running server for `config`, starting or restarting it if this session may.

        `on_server` sees the new server before it is healthy (to show its log while it starts).
        """
        with self._lock:
            now = time.time()
            self.last_used[session_id] = now
            if self.running() == config:
                return self.server
            others = [s for s, t in self.last_used.items()
                      if s != session_id and now - t < IDLE_AFTER_S and s == self.owner]
            if self.running() is not None and others:
                raise EngineBusy(
                    f"Another session is using the engine with {self.config.describe()}. "
                    "Use that configuration, or wait until it has been idle for "
                    f"{IDLE_AFTER_S // 60} minutes."
                )
            self._stop_locked()
            server = LocalServer(model=config.model, spec=config.spec, dtype=config.dtype,
                                 max_model_len=config.max_model_len)
            if on_server:
                on_server(server)
            server.start(progress=progress)
            self.server, self.config, self.owner = server, config, session_id
            return server

    def stop(self) -> None:
        with self._lock:
            self._stop_locked()

    def _stop_locked(self) -> None:
        if self.server is not None:
            self.server.stop()
        self.server = self.config = self.owner = None
