"""Unit: attaching to a server that is not vLLM says so, and an optional endpoint's HTTP error never escapes as a
traceback (issue 43: plain `python -m http.server` read as "not ready"; with a static /health and /v1/models the
recording died on an uncaught httpx.HTTPStatusError 501 from POST /tokenize). Tiny local HTTP servers, no vLLM."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from http.server import BaseHTTPRequestHandler, SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest

from specviz.__main__ import main
from specviz.serving.attached import AttachError, EndpointError, ServerTokenizer, attach
from specviz.serving.server import EngineError

MODELS = {"object": "list", "data": [{"id": "remote-model", "root": "/nowhere/remote-model", "max_model_len": 2048}]}


@contextmanager
def serving(handler) -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@contextmanager
def static_files(tmp_path, files: dict[str, str]) -> Iterator[str]:
    """`python -m http.server` over `files` (path -> body): GET only, POST answers 501 as it does."""
    for name, body in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(body)
    quiet = type("Quiet", (SimpleHTTPRequestHandler,), {"log_message": lambda *a: None})
    with serving(partial(quiet, directory=str(tmp_path))) as url:
        yield url


class AlmostVllm(BaseHTTPRequestHandler):
    """vLLM's endpoints as a real server answers them, except /detokenize, which fails (HTTP 500)."""

    def log_message(self, *args):
        pass

    def _json(self, code: int, body) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        answers = {"/health": {}, "/v1/models": MODELS, "/version": {"version": "0.32.0"}}
        if self.path == "/metrics":
            data = b"# nothing here\n"
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        elif self.path in answers:
            self._json(200, answers[self.path])
        else:
            self._json(404, {"detail": "Not Found"})

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path == "/tokenize":
            self._json(200, {"count": 2, "max_model_len": 2048, "tokens": [1, 2]})
        else:
            self._json(500, {"error": {"message": "boom"}})


def test_a_plain_http_server_is_not_a_vllm_server(tmp_path):
    with static_files(tmp_path, {}) as url, pytest.raises(AttachError) as e:
        attach(url)
    assert f"{url} is not a vLLM server: GET /v1/models answered HTTP 404" in str(e.value)
    assert "not ready" not in str(e.value)


def test_a_static_health_and_models_without_version_or_tokenize_is_not_a_vllm_server(tmp_path):
    with static_files(tmp_path, {"health": "", "v1/models": json.dumps(MODELS)}) as url, pytest.raises(AttachError) as e:
        attach(url)
    assert "is not a vLLM server: it lists models, but GET /version answered HTTP 404 and POST /tokenize" in str(e.value)


def test_a_server_with_version_but_no_tokenize_for_a_model_not_here_is_refused_at_attach(tmp_path):
    files = {"health": "", "v1/models": json.dumps(MODELS), "version": json.dumps({"version": "0.32.0"})}
    with static_files(tmp_path, files) as url, pytest.raises(AttachError, match="does not answer POST /tokenize"):
        attach(url)


def test_a_failing_detokenize_is_an_endpoint_error_and_record_reports_it_without_a_traceback(tmp_path, capsys):
    with serving(AlmostVllm) as url:
        server = attach(url)
        assert server.vllm_version == "0.32.0" and server.model == "remote-model" and server.counters is None
        tokenizer = ServerTokenizer(server)
        with pytest.raises(EndpointError, match=r"/detokenize answered HTTP 500") as e:
            tokenizer.decode([1, 2])
        assert isinstance(e.value, EngineError)  # what `record` catches and reports
        code = main(["record", "--attach", url, "--prompts", "builtin:code", "--num-prompts", "1",
                     "--max-tokens", "4", "--out", str(tmp_path / "run.json.gz")])
    assert code == 2
    assert "/detokenize answered HTTP 500" in capsys.readouterr().err


def test_the_command_line_says_not_a_vllm_server(tmp_path, capsys):
    with static_files(tmp_path, {}) as url:
        code = main(["record", "--attach", url, "--prompts", "builtin:code", "--out", str(tmp_path / "run.json.gz")])
    assert code == 2 and "is not a vLLM server" in capsys.readouterr().err
