"""Hostile files: gzip bombs and oversized files are refused before they cost memory (issue #15)."""

import gzip
import io
import json
import tracemalloc

import pytest

from specviz.files import DEFAULT_MAX_RUN_MB, MAX_RUN_MB_ENV, max_file_bytes, read_capped
from specviz.method_trials import TrialsFileError, load_trials
from specviz.runfile import RunFileError, load_run, run_bytes
from specviz.sweep import SweepError
from specviz.sweep_files import load_sweep

MiB = 1 << 20


def gzip_bomb(inflated_mib: int) -> bytes:
    """gzip data of `inflated_mib` MiB of spaces, built a chunk at a time (a few KiB per MiB)."""
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as g:
        block = b" " * MiB
        for _ in range(inflated_mib):
            g.write(block)
    return buf.getvalue()


@pytest.fixture
def cap_1mib(monkeypatch):
    monkeypatch.setenv(MAX_RUN_MB_ENV, "1")


def test_default_cap_holds_real_runs_and_can_be_raised(monkeypatch):
    monkeypatch.delenv(MAX_RUN_MB_ENV, raising=False)
    assert max_file_bytes() == DEFAULT_MAX_RUN_MB * MiB == 256 * MiB
    monkeypatch.setenv(MAX_RUN_MB_ENV, "1024")
    assert max_file_bytes() == 1024 * MiB
    monkeypatch.setenv(MAX_RUN_MB_ENV, "0.5")
    assert max_file_bytes() == MiB // 2


@pytest.mark.parametrize("value", ["abc", "0", "-3", "inf", "nan"])
def test_a_bad_cap_is_named(monkeypatch, weather_run, value):
    monkeypatch.setenv(MAX_RUN_MB_ENV, value)
    with pytest.raises(RunFileError, match=f"{MAX_RUN_MB_ENV}=.*not a positive number"):
        load_run(run_bytes(weather_run))


def test_a_gzip_bomb_is_refused_while_inflating_without_holding_it(monkeypatch):
    monkeypatch.setenv(MAX_RUN_MB_ENV, "16")
    bomb = gzip_bomb(64)  # 64 MiB inflated, 4x the cap, about 64 KiB of gzip
    assert len(bomb) < MiB
    tracemalloc.start()
    try:
        with pytest.raises(RunFileError) as e:
            load_run(bomb)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    msg = str(e.value)
    assert "<uploaded>: inflates to more than 16.0 MiB" in msg
    assert "at most 16.0 MiB" in msg and f"{MAX_RUN_MB_ENV}=" in msg  # the size, the cap and how to raise it
    assert peak < 4 * MiB, f"refusing the bomb allocated {peak / MiB:.1f} MiB"  # neither the bomb nor the cap


def test_a_gzip_bomb_file_is_refused_too(cap_1mib, tmp_path):
    path = tmp_path / "bomb.json.gz"
    path.write_bytes(gzip_bomb(8))
    with pytest.raises(RunFileError, match=r"bomb\.json\.gz: inflates to more than 1\.0 MiB"):
        load_run(path)


def test_plain_files_and_uploads_over_the_cap_are_refused_by_size(cap_1mib, tmp_path):
    path = tmp_path / "big.json"
    path.write_bytes(b" " * (2 * MiB))
    with pytest.raises(RunFileError, match=r"big\.json: is 2\.0 MiB; specviz reads at most 1\.0 MiB"):
        load_run(path)
    with pytest.raises(RunFileError, match=r"<uploaded>: is 2\.0 MiB"):
        load_run(b" " * (2 * MiB))


def test_runs_under_the_cap_still_load_gzip_plain_and_multi_member(cap_1mib, weather_run):
    data = run_bytes(weather_run, gz=False)
    assert load_run(data) == weather_run
    assert load_run(gzip.compress(data)) == weather_run
    half = len(data) // 2
    assert load_run(gzip.compress(data[:half]) + gzip.compress(data[half:])) == weather_run
    assert read_capped(gzip.compress(b"x" * MiB)) == b"x" * MiB  # exactly the cap is allowed


def test_corrupt_deflate_data_is_a_refusal_not_a_crash():
    header = b"\x1f\x8b\x08\x00" + b"\x00" * 6
    with pytest.raises(RunFileError, match="corrupt or truncated gzip data"):
        load_run(header + b"garbage" * 10)  # zlib.error before: an unhandled exception in the app


def test_sweep_and_trials_loaders_share_the_cap(cap_1mib, tmp_path):
    sweep = tmp_path / "sweep.json"
    sweep.write_bytes(b" " * (2 * MiB))
    with pytest.raises(SweepError, match=r"sweep\.json: is 2\.0 MiB"):
        load_sweep(sweep)
    bomb = tmp_path / "method_trials.json"
    bomb.write_bytes(gzip_bomb(4))
    with pytest.raises(TrialsFileError, match=r"method_trials\.json: inflates to more than 1\.0 MiB"):
        load_trials(bomb)
    with pytest.raises(TrialsFileError, match="does not exist"):
        load_trials(tmp_path / "missing.json")
    trials = tmp_path / "trials.json"
    trials.write_text(json.dumps({"kind": "something else"}))
    with pytest.raises(TrialsFileError, match="not a specviz method-trials file"):
        load_trials(trials)
