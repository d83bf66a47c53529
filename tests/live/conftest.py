"""Fixtures for the live tests (they start real vLLM servers)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def tiny_target(tmp_path_factory):
    """A tiny random-weight target for the live page tests; stops the engine the page shared, after them."""
    from specviz.demo_model import ensure_demo_model
    from specviz.serving.local import live_servers
    from specviz.testing.tiny_models import build_tiny_pair

    target, _ = build_tiny_pair(tmp_path_factory.mktemp("tiny-page"), tokenizer_from=ensure_demo_model())
    yield str(target)
    for server in live_servers():  # the page's shared engine lives in this process
        server.stop()
