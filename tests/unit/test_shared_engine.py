import pytest

from specviz.config import SpecConfig
from specviz.serving import shared as shared_engine
from specviz.serving.shared import EngineBusy, EngineConfig, SharedEngine


class FakeServer:
    started: list["FakeServer"] = []

    def __init__(self, model, spec, dtype, max_model_len):
        self.model, self.spec, self.running = model, spec, False

    def start(self, progress=None):
        self.running = True
        FakeServer.started.append(self)
        return 1.0

    def alive(self):
        return self.running

    def stop(self):
        self.running = False


@pytest.fixture
def shared(monkeypatch):
    FakeServer.started = []
    monkeypatch.setattr(shared_engine, "LocalServer", FakeServer)
    return SharedEngine()


NGRAM = EngineConfig(model="m", spec=SpecConfig.from_dict({"method": "ngram", "num_speculative_tokens": 3}))
BASELINE = EngineConfig(model="m")


def test_same_configuration_reuses_the_engine(shared):
    a = shared.ensure(NGRAM, "alice")
    assert shared.ensure(NGRAM, "bob") is a and len(FakeServer.started) == 1


def test_owner_may_switch_configuration(shared):
    a = shared.ensure(NGRAM, "alice")
    b = shared.ensure(BASELINE, "alice")
    assert b is not a and not a.alive() and b.alive()


def test_second_session_is_told_what_runs_instead_of_restarting_it(shared):
    a = shared.ensure(NGRAM, "alice")
    with pytest.raises(EngineBusy, match=r"m \(ngram, k=3; auto\)"):
        shared.ensure(BASELINE, "bob")
    assert a.alive() and len(FakeServer.started) == 1


def test_an_idle_owner_no_longer_holds_the_engine(shared, monkeypatch):
    shared.ensure(NGRAM, "alice")
    shared.last_used["alice"] -= shared_engine.IDLE_AFTER_S + 1
    shared.ensure(BASELINE, "bob")
    assert shared.running() == BASELINE and shared.owner == "bob"


def test_stop_ends_the_engine(shared):
    a = shared.ensure(NGRAM, "alice")
    shared.stop()
    assert not a.alive() and shared.running() is None
