"""Why an engine failed, from its own log; and whether a request's error means the engine is gone.

When vLLM's EngineCore dies, every request gets the same generic message ("EngineCore encountered
an issue. See stack trace (above) for the root cause."), and the stack trace it points to is only in
the server's log, among the API server's own tracebacks of that generic error. `root_cause` finds
the engine's own exception there:

    (Worker pid=7189) ERROR 12-04 16:33:57 [multiproc_executor.py:1063] Traceback (most recent call last):
    (Worker ...) ERROR ... [...]   File ".../vllm/utils/cpu_triton_utils.py", line 330, in _rejection_greedy_...
    (Worker ...) ERROR ... [...]     assert not SYNTHETIC_MODE, "Synthetic acceptance not supported with CPU sampling"
    (Worker ...) ERROR ... [...] AssertionError: Synthetic acceptance not supported with CPU sampling
    (EngineCore ...) ERROR ... [core.py:1512] RuntimeError: Worker failed with error '...', please check the
        stack trace above for the root cause
    (APIServer ...) ERROR ... [async_llm.py:906] vllm.v1.engine.exceptions.EngineDeadError: EngineCore
        encountered an issue. See stack trace (above) for the root cause.

    root_cause(log_text) ->
    "AssertionError: Synthetic acceptance not supported with CPU sampling
       (Worker process, vllm/utils/cpu_triton_utils.py line 330, in _rejection_greedy_sample_kernel_impl)"

No process and no I/O here: serving.local reads the log, recording decides what to do.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# vLLM's log prefix: "(EngineCore pid=7025) ERROR 12-04 16:33:57 [core.py:1512] ", both parts optional
# (a single-process server has no "(Name pid=N)"; raw stderr, such as a traceback Python prints
# itself, has no level header).
_PREFIX = re.compile(
    r"^(?:\((?P<process>[A-Za-z][\w:.-]*)(?: pid=\d+)?\) )?"
    r"(?P<header>(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[[^\]]*\] ?)?"
)
_FRAME = re.compile(r'^\s+File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<func>.+)$')
_TRACEBACK = "Traceback (most recent call last):"
# Messages that only point elsewhere: vLLM's EngineDeadError, and the EngineCore's wrapper of a worker's error.
_POINTERS = ("see stack trace (above)", "check the stack trace above", "see the stack trace above",
             "see root cause above")
# Lines that say the engine process went away without a traceback (killed by a signal, the OOM killer).
_DEATH = re.compile(r"exited unexpectedly|died unexpectedly|terminated unexpectedly|killed", re.IGNORECASE)
_MAX_MESSAGE_LINES = 6

# What a request's error looks like when the engine is gone (stream.stream_completion's messages).
ENGINE_DEAD_MESSAGE = "EngineCore encountered an issue"  # vllm/v1/engine/exceptions.py, EngineDeadError
_CONNECTION_GONE = ("ConnectError", "ReadError", "RemoteProtocolError", "WriteError")


@dataclass
class _Raised:
    process: str
    message: list[str]
    frame: str

    def text(self) -> str:
        where = ", ".join(filter(None, [f"{self.process} process" if self.process else "", self.frame]))
        return "\n".join(self.message) + (f"\n  ({where})" if where else "")


def root_cause(log_text: str) -> str | None:
    """The engine's own error in a vLLM server log: its exception line(s) and where it was raised.

    The first exception of any traceback in the log that does not just point to another stack trace
    (vLLM's EngineDeadError does); if no traceback names one, the first warning or error line saying a
    process died or exited unexpectedly (an EngineCore killed by a signal); else None. Pass the part
    of the log written since the failure could have started, so that older, handled errors are not
    taken for it (serving.local passes what came after the server became healthy).
    """
    open_tracebacks: dict[str, dict] = {}  # per process: a traceback being read
    raised: list[_Raised] = []
    death_line = None
    lines = log_text.splitlines()
    for line in lines:
        m = _PREFIX.match(line)
        process, header = m.group("process") or "", m.group("header") or ""
        message = line[m.end():]
        current = open_tracebacks.get(process)
        if current is not None and current["collecting"]:
            # The exception's message may run over several lines of the same log record.
            if (header and header == current["header"] and message.strip() and message != _TRACEBACK
                    and not message.startswith(("The above exception", "During handling"))
                    and len(current["raised"].message) < _MAX_MESSAGE_LINES):
                current["raised"].message.append(message)
                continue
            del open_tracebacks[process]
            current = None
        if message == _TRACEBACK:
            open_tracebacks[process] = {"header": header, "frame": "", "collecting": False}
            continue
        if current is not None:
            if message.startswith((" ", "\t")):
                if frame := _FRAME.match(message):
                    current["frame"] = f"{_short_path(frame['path'])} line {frame['line']}, in {frame['func']}"
                continue
            if not message.strip():
                continue
            current["raised"] = _Raised(process=process, message=[message], frame=current["frame"])
            current["collecting"] = bool(header)  # raw stderr has no header to tell its record apart
            raised.append(current["raised"])
            continue
        if death_line is None and header.startswith(("WARNING", "ERROR", "CRITICAL")) and _DEATH.search(message):
            death_line = f"({process}) {message.strip()}" if process else message.strip()
    for r in raised:
        if not any(p in " ".join(r.message).lower() for p in _POINTERS):
            return r.text()
    return death_line


def _short_path(path: str) -> str:
    """A frame's file from its package down: '.../site-packages/vllm/utils/x.py' -> 'vllm/utils/x.py'."""
    return path.split("site-packages/", 1)[-1]


def engine_gone(error: str | None) -> bool:
    """True when a request's error says the engine is gone, so the next requests cannot succeed.

    'HTTP 500: ... EngineCore encountered an issue ...' (vLLM's EngineDeadError), or the connection
    refused or cut ('ConnectError: [Errno 111] Connection refused'). A refused request ('HTTP 400:
    ... maximum context length ...') is not: the others go on.
    """
    if not error:
        return False
    return ENGINE_DEAD_MESSAGE in error or error.startswith(_CONNECTION_GONE)


def failed_on_the_server(error: str | None) -> bool:
    """True for errors whose cause is in the server's log: the engine gone, or an HTTP 5xx."""
    return engine_gone(error) or bool(error and error.startswith("HTTP 5"))


def died_reason(*, first_error: str | None, engine_error: str | None, num_not_sent: int, log_tail: str = "") -> str:
    """A run's incomplete_reason when its engine died: the engine's own error if its log has one.

        died_reason(first_error="HTTP 500: ... EngineCore encountered an issue ...", engine_error="AssertionError: x",
                    num_not_sent=3)
        -> "the vLLM engine died during the run:\\nAssertionError: x\\n3 requests were not sent after that."
    Without the engine's error, the first request error and the server log's tail say what is known.
    """
    not_sent = (f"\n{num_not_sent} request{'s were' if num_not_sent != 1 else ' was'} not sent after that."
                if num_not_sent else "")
    if engine_error:
        return f"the vLLM engine died during the run:\n{engine_error}{not_sent}"
    return (f"the vLLM server died during the run ({first_error or 'the server stopped'}).{not_sent}"
            + (f"\nServer log tail:\n{log_tail}" if log_tail else ""))
