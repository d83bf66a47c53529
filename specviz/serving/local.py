"""A vLLM server specviz starts, traced by serving.tracer, in its own process group.

    with LocalServer(model="/models/SmolLM2", spec=SpecConfig.parse('{"method":"ngram",...}')) as server:
        server.start(progress=print)              # waits for /health, shows the log tail on failure
        run = record(server, prompts, prompt_set="chat", concurrency=4, max_tokens=128)

The server is `python -m vllm.entrypoints.openai.api_server` (the command line comes from
serve_command.serve_command, the one builder), so stop() ends the API server, its EngineCore child and
anything they spawned.

No server outlives the process that started it, however that process ends (a SIGKILL included): each
server has a watchdog, a small process in a session of its own that reads a pipe only this process holds
and SIGKILLs the server's whole process group when the pipe ends without a 'stopped' line. Not
prctl(PR_SET_PDEATHSIG) on the API server: it fires when the *thread* that started the server ends (a
Streamlit script thread ends after every rerun), and it would reach the API server alone, not the
EngineCore and workers it spawned.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from ..config import SpecConfig
from ..demo_model import default_dtype
from ..files import REPO_DIR
from ..platforms import attention_backends_from_log, model_dtype_from_log
from ..serve_command import serve_command
from .engine_log import root_cause
from .recording import load_tokenizer
from .server import EngineError, Provenance, local_device, vllm_version
from .trace_reader import TRACE_FILE_ENV


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


@dataclass(eq=False)  # identity semantics: servers live in a set
class LocalServer:
    """A vLLM OpenAI-compatible server started by specviz, traced by serving.tracer."""

    model: str
    spec: SpecConfig | None = None
    port: int | None = None
    dtype: str | None = None  # None: demo_model.default_dtype (float32 for the demo model, else 'auto')
    max_model_len: int = 2048
    seed: int = 0
    trace: bool = True
    extra_args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    workdir: Path | None = None  # log and trace files; a fresh temp dir if None (removed by stop unless kept)
    keep_files: bool = False  # keep a temp workdir after stop (a failed run: its log is evidence)
    on_spawn: Callable[[LocalServer], None] | None = field(default=None, repr=False)  # see start()

    proc: subprocess.Popen | None = field(default=None, init=False, repr=False)
    start_time_s: float | None = field(default=None, init=False)
    ready_after_s: float | None = field(default=None, init=False)
    ready_log_offset: int = field(default=0, init=False)  # log size when /health first answered
    watchdog: subprocess.Popen | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.temp_workdir = self.workdir is None
        self.workdir = Path(self.workdir or tempfile.mkdtemp(prefix=TEMP_PREFIX))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.workdir / "server.log"
        self.trace_path = self.workdir / "trace.jsonl"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        options = ["--host", "127.0.0.1", "--dtype", self.dtype or default_dtype(self.model), "--max-model-len", str(self.max_model_len),
                   "--seed", str(self.seed)]
        from ..mimo import tokenizer_for

        if (tokenizer := tokenizer_for(self.model)) != str(self.model):  # a MiMo form: see specviz.mimo
            options += ["--tokenizer", tokenizer]
        if local_device()[0] == "cpu":  # no graphs to capture on CPU; eager starts faster
            options.append("--enforce-eager")
        return serve_command(self.model, self.spec, trace=self.trace, port=self.port, python_module=True,
                             python=sys.executable, extra=options + self.extra_args)

    @property
    def pgid(self) -> int | None:
        """The server's process group (its leader's pid: it starts a session of its own); None before start."""
        return self.proc.pid if self.proc is not None else None

    def start(self, progress: Callable[[float, str], None] | None = None, timeout_s: float = 900) -> float:
        """Start the server and wait until /health answers; return the seconds it took.

        `progress(elapsed_s, log_tail)` is called twice a second with the last 8 lines of the log;
        `self.on_spawn(server)`, if set, once the process group exists (a sweep's lock names it).

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
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_DIR), os.environ.get("PYTHONPATH")])),  # vLLM imports this specviz
            TRACE_FILE_ENV: str(self.trace_path),
            "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1"),
        } | self.env
        self.trace_path.unlink(missing_ok=True)
        log = open(self.log_path, "wb")  # the child keeps writing to it
        self.start_time_s = time.time()
        self.proc = subprocess.Popen(
            self.command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=env, start_new_session=True,
        )
        log.close()
        _live_servers.add(self)
        self.watchdog = start_watchdog(self.proc.pid)
        if self.on_spawn:
            self.on_spawn(self)
        deadline = time.monotonic() + timeout_s
        with httpx.Client(timeout=2.0) as client:
            while True:
                elapsed = time.time() - self.start_time_s
                if self.proc.poll() is not None:
                    code = self.proc.returncode
                    self.keep_files = True
                    self.stop()
                    cause = self.engine_error(since_start=True)
                    raise EngineError(f"vLLM exited with code {code} while starting."
                                      + (f" The engine's error, from its log:\n{cause}" if cause else "")
                                      + f"\nServer log tail:\n{self.log_tail()}")
                try:
                    if client.get(f"{self.url}/health").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    self.keep_files = True
                    self.stop()
                    raise EngineError(f"vLLM did not become healthy within {timeout_s:.0f} s.\n{self.log_tail()}")
                if progress:
                    progress(elapsed, self.log_tail(8))
                time.sleep(0.5)
        self.ready_after_s = time.time() - self.start_time_s
        self.ready_log_offset = self._log_size()
        return self.ready_after_s

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def tokenizer(self):
        return load_tokenizer(self.model)

    def members(self) -> list[LocalServer]:
        return [self]

    def provenance(self) -> Provenance:
        platform_name, device = local_device()
        # A traced server runs with --no-async-scheduling; the CPU platform forces it off anyway.
        try:
            log = self.log_path.read_text(errors="replace")
        except OSError:
            log = ""
        return Provenance(platform=platform_name, device_name=device, vllm_version=vllm_version(),
                          async_scheduling=not self.trace and platform_name != "cpu",
                          attention_backends=attention_backends_from_log(log), dtype=model_dtype_from_log(log))

    def engine_error(self, *, since_start: bool = False) -> str | None:
        """The engine's own error from its log (see engine_log.root_cause), or None.

        Read from where the log stood when the server became ready (since_start: the whole log),
        so that a failure during a run is not confused with something logged while starting. A
        server killed by a signal logs nothing: then that is the error ('the server process was
        killed by signal 9 (SIGKILL)').
        """
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0 if since_start else self.ready_log_offset)
                text = f.read().decode(errors="replace")
        except OSError:
            text = ""
        code = self.proc.poll() if self.proc is not None else None
        return root_cause(text) or (f"the server process was {signal_description(code)}" if code and code < 0
                                    else None)

    def _log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def log_tail(self, n: int = 30) -> str:
        try:
            with open(self.log_path, "rb") as f:
                return b"".join(deque(f, maxlen=n)).decode(errors="replace").rstrip()
        except OSError:
            return ""

    def stop(self, grace_s: float = 20) -> None:
        """End the server's whole process group: SIGTERM, then SIGKILL for whatever is left after grace_s.

        A Ctrl-C (KeyboardInterrupt) while it waits cuts the grace short: the group is SIGKILLed at once,
        then the interrupt goes on. The server leaves the live list (the exit hook's retry) only once its
        group is gone. Its temp folder is removed then, unless the server died by itself or keep_files
        is set (a failed run): then the log's path is printed and the folder kept.
        """
        if self.proc is None:
            _live_servers.discard(self)
            return
        pgid = self.proc.pid
        died_by_itself = self.proc.poll() is not None
        try:
            for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10)):
                try:
                    os.killpg(pgid, sig)
                except ProcessLookupError:
                    break
                if self._group_ends_within(pgid, wait_s):
                    break
        except KeyboardInterrupt:
            _kill_group_now(pgid)
            self._group_ends_within(pgid, 10)  # SIGKILL cannot be refused: this is short
            raise
        finally:
            if not live_group_members(pgid):
                self._forget(keep=died_by_itself or self.keep_files)

    def _forget(self, *, keep: bool) -> None:
        """The group is gone: disarm the watchdog, leave the live list, remove or keep the temp folder."""
        if self.proc is not None:
            self.proc.poll()
        self.proc = None
        stop_watchdog(self.watchdog)
        self.watchdog = None
        _live_servers.discard(self)
        if not self.temp_workdir:
            return
        if keep:
            print(f"specviz: the server's log is kept in {self.log_path}", file=sys.stderr)
        else:
            shutil.rmtree(self.workdir, ignore_errors=True)

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

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None and not issubclass(exc_type, (KeyboardInterrupt, GeneratorExit)):
            self.keep_files = True  # the work with this server failed: its log is evidence
        self.stop()


TEMP_PREFIX = "specviz-server-"

# The watchdog: blocks on stdin (a pipe whose write end only specviz holds). A 'stopped' line means the
# server was stopped properly; anything else (end of file: specviz is gone) SIGKILLs the server's group.
# Signals from the terminal or a group kill aimed at specviz do not reach it (its own session), and it
# ignores SIGINT/SIGTERM/SIGHUP so that nothing but the pipe decides.
_WATCHDOG = """
import os, signal, sys
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, signal.SIG_IGN)
if sys.stdin.readline().strip() != "stopped":
    try:
        os.killpg(int(sys.argv[1]), signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
"""


def start_watchdog(pgid: int) -> subprocess.Popen | None:
    """A process that SIGKILLs group pgid when this process ends without stop_watchdog (see _WATCHDOG)."""
    try:
        return subprocess.Popen([sys.executable, "-S", "-c", _WATCHDOG, str(pgid)], stdin=subprocess.PIPE,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError:
        return None  # no watchdog: stop() and the exit hook still stop the server on an ordinary exit


def stop_watchdog(watchdog: subprocess.Popen | None) -> None:
    """Tell the watchdog its server was stopped properly, and let it exit."""
    if watchdog is None:
        return
    try:
        watchdog.stdin.write(b"stopped\n")
        watchdog.stdin.close()
    except (BrokenPipeError, OSError, ValueError):
        pass
    try:
        watchdog.wait(timeout=5)
    except subprocess.TimeoutExpired:
        watchdog.kill()


def _kill_group_now(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def is_vllm_group(pgid: int) -> bool:
    """True when a live member of group pgid runs vLLM (so a group id named in an old lock, maybe reused
    since by something else, is only stopped when it is still a vLLM engine)."""
    for pid in live_group_members(pgid):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if b"vllm" in cmdline or b"VLLM" in cmdline:
            return True
    return False


def stop_leftover_group(pgid: int, grace_s: float = 10) -> bool:
    """Stop the vLLM process group pgid left by a dead specviz: SIGTERM, SIGKILL after grace_s. True if one
    was running (and is now gone)."""
    if not is_vllm_group(pgid):
        return False
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait_s
        while live_group_members(pgid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if not live_group_members(pgid):
            break
    return True


def signal_description(returncode: int) -> str:
    """'killed by signal 9 (SIGKILL)' for a Popen returncode of -9."""
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = "unknown signal"
    return f"killed by signal {-returncode} ({name})"


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


def live_servers() -> list[LocalServer]:
    """The servers this process started and has not stopped (tests stop a page's shared engine with it)."""
    return list(_live_servers)


@atexit.register
def _stop_all_servers() -> None:
    for server in list(_live_servers):
        server.stop(grace_s=5)

