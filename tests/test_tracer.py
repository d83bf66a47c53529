from types import SimpleNamespace

import pytest

from specviz.tracer import TracerError, check_can_trace


def _config(async_scheduling: bool, spec: object | None):
    return SimpleNamespace(scheduler_config=SimpleNamespace(async_scheduling=async_scheduling),
                           speculative_config=spec)


def test_tracer_refuses_async_scheduling_with_drafts():
    with pytest.raises(TracerError, match="--no-async-scheduling"):
        check_can_trace(_config(True, object()))


def test_tracer_accepts_sync_scheduling_and_async_baselines():
    check_can_trace(_config(False, object()))
    check_can_trace(_config(True, None))  # no drafts to hide: a baseline traces fine
