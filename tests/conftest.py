"""Fixtures for every test folder. Plain helpers (hand-built runs) are in run_builders.py, on pytest's pythonpath."""

from __future__ import annotations

import pytest
from run_builders import make_run, make_step

from specviz.runfile import Request, Run


@pytest.fixture
def weather_run() -> Run:
    """The worked example: drafts 'sunny and warm outside', target accepts 2 and puts 'clear'.

    Token ids: sunny=1 and=2 warm=3 outside=4 clear=5 today=6 .=7 it=8 is=9
    step 0: prefill, no drafts, samples [6]
    step 1: drafts [1,2,3,4] -> sampled [1,2,5]     accepted 2, correction 5, tail [4] discarded
    step 2: drafts [7,8,9]   -> sampled [7,8,9,2]   all accepted, bonus 2
    """
    steps = [make_step(0, [], [6]), make_step(1, [1, 2, 3, 4], [1, 2, 5]), make_step(2, [7, 8, 9], [7, 8, 9, 2])]
    req = Request(
        request_id="r0", prompt="The weather today is", output_token_ids=[6, 1, 2, 5, 7, 8, 9, 2],
        output_text="x", start_time_s=999.0, first_token_time_s=1000.0, end_time_s=1002.0,
        finish_reason="length", steps=steps,
    )
    return make_run([req], k=4)
