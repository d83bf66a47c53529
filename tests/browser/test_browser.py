"""The app in a real browser: streamlit serves app.py, Debian's chromium (driven by Playwright) opens it.

What AppTest cannot see: the page the browser builds from our HTML. A speculative sample run must show
its accepted, correction and discarded chips in the counts the run file implies, and a token that looks
like HTML must reach the page as text, not as markup. A full-page screenshot goes to test-artifacts/.

Needs /usr/bin/chromium (scripts/setup.sh installs it when it runs as root with apt) and the playwright
package; Playwright's own browser download is not used. Skipped when either is missing.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
if not os.path.exists(CHROMIUM):
    pytest.skip(f"{CHROMIUM} is missing (scripts/setup.sh installs it as root with apt)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")

from run_builders import make_run  # noqa: E402

from specviz import headline, race  # noqa: E402
from specviz.files import REPO_DIR as ROOT  # noqa: E402
from specviz.playground import shown_run_name  # noqa: E402
from specviz.roles import output_roles, step_roles  # noqa: E402
from specviz.runfile import SAMPLE_RUNS_DIR, Request, Step, list_run_files, load_run, save_run  # noqa: E402
from specviz.showcase import example_step, opening_request, opening_run  # noqa: E402
from specviz.sweep_files import list_sweep_files, load_sweep  # noqa: E402
from specviz.view import race_html  # noqa: E402

pytestmark = pytest.mark.browser

ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]
TIMEOUT_MS = 60_000  # a 2-core machine reruns the page in a few seconds; leave room
sync_api.expect.set_options(timeout=TIMEOUT_MS)
STEPS_SHOWN = 60  # the page's default step range is steps 1..60

# Both must stay text. Browsers do not run <script> inserted through innerHTML and streamlit's markdown
# drops on* handlers, so window.__pwned alone would not notice broken escaping (tried: with escape()
# removed it stays undefined while <img>/<script> elements appear): the text and element checks do.
SCRIPT_TOKEN = "<script>window.__pwned=1</script>"
IMG_TOKEN = "<img/src=x/onerror=window.__pwned=2>"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def app_server(tmp_path_factory):
    """`streamlit run app.py` with the shipped settings, in its own process group, killed (the whole group)
    afterwards; yields (url, path of its log)."""
    port = _free_port()
    log_path = tmp_path_factory.mktemp("streamlit") / "streamlit.log"
    log = open(log_path, "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
         "--server.port", str(port), "--browser.gatherUsageStats", "false"],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"

    def fail(why: str):
        pytest.fail(f"{why}; streamlit's log ends:\n{log_path.read_text()[-3000:]}")

    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                fail(f"streamlit exited with code {proc.returncode} before answering")
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                fail("streamlit did not answer /_stcore/health within 60 s")
            time.sleep(0.3)
        yield url, log_path
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=10)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


@pytest.fixture(scope="module")
def app_url(app_server):
    return app_server[0]


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser, app_url):
    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    p = context.new_page()
    p.set_default_timeout(TIMEOUT_MS)
    p.goto(app_url)
    # The app opens on the playground, on a recorded run: no engine needed.
    sync_api.expect(p.get_by_role("heading", name="Playground")).to_be_visible()
    sync_api.expect(p.get_by_role("radio", name="Recorded run")).to_be_checked()
    yield p
    context.close()


def _wait_idle(page) -> None:
    """Wait until streamlit has finished the current script run (its status widget says 'Running...')."""
    page.wait_for_timeout(300)
    sync_api.expect(page.get_by_test_id("stStatusWidget")).to_have_count(0)


def _expected_chips(req: Request) -> dict[str, int]:
    """Chips per role on the page: one in the legend, the example step, the output, the first 60 steps' rows."""
    out = [r for _, r in output_roles(req)]
    rows = [r for s in req.steps[:STEPS_SHOWN] for _, r in step_roles(s)]
    ex = example_step(req)
    example = [r for _, r in step_roles(req.steps[ex])] if ex is not None else []
    return {role: 1 + example.count(role) + out.count(role) + rows.count(role)
            for role in ("accepted", "correction", "discarded")}


def _speculative_sample() -> tuple[Path, dict[str, int]]:
    """The first ngram sample whose default request (the first) shows all three roles beyond the legend."""
    for path in list_run_files():
        if "ngram" in path.name:
            run = load_run(path)
            want = _expected_chips(run.requests[opening_request(run)])  # the request the view opens on
            if all(n > 1 for n in want.values()):
                return path, want
    pytest.fail("no ngram sample run in sample_runs/ shows accepted, correction and discarded tokens")


def _select_run_file(page, name: str) -> None:
    shown = shown_run_name(name)  # as the selector labels it (the folder and the end kept)
    box = page.locator(".st-key-run_file").get_by_role("combobox")
    box.click()
    box.type(shown)  # the list is virtualised: filter it so the option is rendered
    page.get_by_role("option", name=shown, exact=True).click()


def _screenshot(page, path: Path) -> None:
    """Full page: streamlit scrolls inside its main container, so grow the viewport to its content first."""
    height = page.evaluate("() => Math.max(document.querySelector('[data-testid=\"stMain\"]')?.scrollHeight || 0,"
                           " document.documentElement.scrollHeight)")
    page.evaluate("() => document.activeElement?.blur()")  # no focus ring left on the selectbox we used
    page.set_viewport_size({"width": page.viewport_size["width"], "height": min(int(height) + 40, 16_000)})
    page.wait_for_timeout(500)  # let plotly and the layout settle at the new size
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=True)


def test_speculative_sample_shows_its_chips(page):
    path, want = _speculative_sample()
    name = str(path.relative_to(SAMPLE_RUNS_DIR))  # as the selectbox lists it ("showcase/...")
    _select_run_file(page, name)
    _wait_idle(page)
    sync_api.expect(page.locator(".st-key-run_file").get_by_role("combobox")).to_have_value(shown_run_name(name))
    for role, n in want.items():
        sync_api.expect(page.locator(f"span.sv-{role}")).to_have_count(n)
        sync_api.expect(page.locator(f"span.sv-{role}").first).to_be_visible()
    # the acceptance-per-position chart is drawn for a speculative run
    sync_api.expect(page.locator(".st-key-acc_per_pos .main-svg").first).to_be_visible()
    _screenshot(page, ARTIFACTS / "playground_recorded_run.png")


def _html_token_run(tmp_path: Path) -> Path:
    """One request: a prefill token, then a step whose accepted draft, correction and discarded tail look like HTML.

    ids: 10=" Hi" 11=SCRIPT_TOKEN 12=IMG_TOKEN 13="<b>bold?</b>"
    """
    steps = [
        Step(engine_step=0, time_s=1000.0, draft_token_ids=[], sampled_token_ids=[10], committed_token_ids=[10],
             num_accepted=0, sampled_texts=[" Hi"]),
        Step(engine_step=1, time_s=1001.0, draft_token_ids=[11, 13, 12], sampled_token_ids=[11, 12],
             committed_token_ids=[11, 12], num_accepted=1,
             draft_texts=[SCRIPT_TOKEN, "<b>bold?</b>", IMG_TOKEN], sampled_texts=[SCRIPT_TOKEN, IMG_TOKEN]),
    ]
    req = Request(request_id="xss", prompt="Say hi", output_token_ids=[10, 11, 12],
                  output_text=" Hi" + SCRIPT_TOKEN + IMG_TOKEN, start_time_s=999.0, first_token_time_s=1000.0,
                  end_time_s=1001.0, finish_reason="length", steps=steps)
    return save_run(make_run([req], k=3, run_id="html-token"), tmp_path / "html-token.json")


def test_html_looking_tokens_are_shown_as_text(page, tmp_path):
    run_file = _html_token_run(tmp_path)
    page.locator(".st-key-run_upload input[type=file]").set_input_files(str(run_file))
    _wait_idle(page)
    # the uploaded run is on screen: its request id in the request selectbox, its chips in the rows
    sync_api.expect(page.locator(".st-key-request_id").get_by_role("combobox")).to_have_value("xss: Say hi")
    # the legend, then the "<b>bold?</b>" tail in the example step and in its step row
    sync_api.expect(page.locator("span.sv-discarded")).to_have_count(1 + 1 + 1)
    assert page.evaluate("() => typeof window.__pwned") == "undefined"
    text = page.locator("body").inner_text()
    assert "<script>" in text and "</script>" in text
    assert "<img/src=x/onerror" in text and "<b>bold?</b>" in text
    # nothing the tokens spelled became an element inside our HTML
    assert page.locator(".sv-output script, .sv-row script, .sv-output img, .sv-row img, .sv-row b").count() == 0
    page.wait_for_timeout(500)  # an onerror would fire asynchronously; look again
    assert page.evaluate("() => typeof window.__pwned") == "undefined"


# ---- a newcomer's first minute: a speculative run on the first screen, then the race ------------------


def _sample_entries():
    return [(str(p.relative_to(SAMPLE_RUNS_DIR)), load_run(p)) for p in list_run_files()]


def test_newcomer_sees_speculation_on_the_first_screen_and_races_it(page):
    entries = _sample_entries()
    name = opening_run(entries)
    run = dict(entries)[name]
    req = run.requests[opening_request(run)]
    _wait_idle(page)
    # the app opened on the best speculative sample run, on the request that shows drafting best
    sync_api.expect(page.locator(".st-key-run_file").get_by_role("combobox")).to_have_value(shown_run_name(name))
    assert run.meta.speculative_config is not None
    # accepted and rejected chips of a real step, not only the legend's samples, without scrolling
    for role in ("accepted", "rejected", "correction"):
        chip = page.locator(f".sv-example span.sv-{role}").first
        sync_api.expect(chip).to_be_in_viewport()
    sync_api.expect(page.locator(".sv-output span.sv-accepted").first).to_be_in_viewport()
    mal = page.get_by_test_id("stMetricValue").nth(1)
    sync_api.expect(mal).not_to_have_text("–")
    button = page.get_by_role("button", name="Race it against the baseline")
    sync_api.expect(button).to_be_in_viewport()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.evaluate("() => document.activeElement?.blur()")
    page.screenshot(path=str(ARTIFACTS / "newcomer_first_screen.png"))

    # one click: the race starts, both lanes fill, and the finish line shows the measured speedup
    page.evaluate(CLOCK_RECORDER_JS)
    button.click()
    page.evaluate("() => { window.__clicked = performance.now(); }")
    sync_api.expect(page.locator(".sv-lane")).to_have_count(2)
    pair = race.find_baseline(run, [e for e in entries if e[0] != name])
    the_race = race.race_for(pair, req, race.spec_label(run))
    result = page.locator(".sv-result")
    sync_api.expect(result).to_be_visible(timeout=TIMEOUT_MS)  # the replay takes a few seconds
    sync_api.expect(result).to_contain_text(f"finished this request {the_race.speedup:.2f}x faster")
    sync_api.expect(page.locator(".sv-lane-spec .sv-flag-done")).to_contain_text(
        f"finished in {race_html._fmt_s(the_race.speculative.finish_s)}")
    sync_api.expect(page.locator(".sv-lane-spec .sv-stat b").nth(1)).to_have_text(
        str(the_race.speculative.num_passes))  # target passes, counted up to the recorded total
    sync_api.expect(page.locator(".sv-lane-spec span.sv-accepted").first).to_be_visible()
    sync_api.expect(page.get_by_role("button", name="Race again")).to_be_visible()
    _assert_the_clock_ran_smoothly(page, the_race)
    _wait_idle(page)
    _screenshot(page, ARTIFACTS / "playground_race_finished.png")


# Records (ms since page load, text) each time the race clock's text changes while the browser plays the race
# (race_html.replay_script marks the track sv-live), as the browser shows it; and when the race was asked for.
CLOCK_RECORDER_JS = """() => {
  window.__clock = [];
  window.__clicked = performance.now();
  window.__longtasks = [];  // main-thread work over 50 ms: tells a busy page from a starved browser
  new PerformanceObserver((list) => list.getEntries().forEach(
    (e) => window.__longtasks.push([e.startTime, e.duration]))).observe({type: "longtask"});
  new MutationObserver(() => {
    const el = document.querySelector('.sv-live .sv-clock');
    if (!el) return;
    const last = window.__clock[window.__clock.length - 1];
    if (!last || last[1] !== el.textContent) window.__clock.push([performance.now(), el.textContent]);
  }).observe(document.body, {subtree: true, childList: true, characterData: true});
}"""
MAX_CLOCK_GAP_S = 0.5  # the demo's key moment: the clock must not jump...
MAX_CLOCK_FREEZE_S = 1.5  # ...or freeze (the old server-drawn race froze for 8.7 s). A 2-core machine busy with
# other work can stall the browser itself for half a second (seen at load 6-10): one such gap fails the freeze
# bound only, and the 90th percentile stays the smoothness check.


def _assert_the_clock_ran_smoothly(page, the_race) -> None:
    """The race clock's updates while the browser plays the race, to the finish: gaps under MAX_CLOCK_GAP_S
    (90th percentile), none over MAX_CLOCK_FREEZE_S, pace as chosen. (Before it plays, the page is still being
    drawn after the click: reported, not bounded.)"""
    samples = [(ms / 1000, float(re.search(r"race clock ([\d.]+) s", text).group(1)))
               for ms, text in page.evaluate("() => window.__clock")]
    speed = float(re.search(r"replayed at ([\d.]+)x", page.locator(".sv-clock").inner_text()).group(1))
    running = [(wall, t) for wall, t in samples if t < the_race.duration_s - 0.01]
    end = next(wall for wall, t in samples if t >= the_race.duration_s - 0.01)
    walls = [w for w, _ in running] + [end]
    gaps = sorted(b - a for a, b in zip(walls, walls[1:]))
    worst = max(range(len(walls) - 1), key=lambda i: walls[i + 1] - walls[i])
    pace = (samples[-1][1] - running[0][1]) / (end - running[0][0]) / speed
    started_s = walls[0] - page.evaluate("() => window.__clicked") / 1000
    print(f"\nrace clock: playing {started_s:.2f} s after the click; {len(walls)} updates over "
          f"{end - walls[0]:.2f} s of wall clock at {speed:g}x; "
          f"gaps median {gaps[len(gaps) // 2]:.3f} s, 90th percentile {gaps[int(len(gaps) * 0.9)]:.3f} s, "
          f"max {gaps[-1]:.3f} s (after update {worst + 1}); replay time / wall time / speed = {pace:.2f}")
    long_tasks = [(round(t / 1000, 2), round(d / 1000, 2)) for t, d in page.evaluate("() => window.__longtasks")
                  if d > 200 and t / 1000 > walls[0]]
    print(f"main-thread tasks over 0.2 s during the replay (start s, length s): {long_tasks}")
    assert len(walls) > 10
    assert gaps[int(len(gaps) * 0.9)] < MAX_CLOCK_GAP_S, f"the race clock jumped: gaps {gaps[-10:]}"
    assert gaps[-1] < MAX_CLOCK_FREEZE_S, (f"the race clock froze for {gaps[-1]:.2f} s; around it (wall s, race s): "
                                           f"{samples[max(worst - 3, 0):worst + 4]}")
    assert 0.8 < pace < 1.25, "the replay did not keep the recorded pace"


def test_dragging_across_the_timeline_chooses_the_step_rows(page):
    _wait_idle(page)
    chart = page.locator("[class*='st-key-step_timeline_'] .vega-embed svg.marks, "
                         "[class*='st-key-step_timeline_'] .vega-embed canvas").first
    chart.scroll_into_view_if_needed()
    page.wait_for_timeout(500)
    rows = page.locator(".sv-row .sv-stepno")
    sync_api.expect(rows.first).to_have_text("step 1")  # (the example step above the rows has no step column)
    box = chart.bounding_box()
    y = box["y"] + box["height"] * 0.6
    page.mouse.move(box["x"] + box["width"] * 0.45, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.65, y, steps=8)
    page.mouse.up()
    caption = page.get_by_text(re.compile(r"Step rows \d+–\d+ of \d+ \(chosen on the timeline"))
    sync_api.expect(caption).to_be_visible()
    _wait_idle(page)
    first, last = (int(n) for n in re.search(r"Step rows (\d+)–(\d+)", caption.inner_text()).groups())
    assert 1 < first <= last
    sync_api.expect(rows.first).to_have_text(f"step {first}")  # the rows follow once the rerun lands
    labels = [t for t in rows.all_inner_texts() if t]
    assert labels == [f"step {i}" for i in range(first, last + 1)]
    _screenshot(page, ARTIFACTS / "playground_timeline_brushed.png")


def _cut(page, selector: str) -> list[str]:
    """Texts of the elements matching `selector` whose content is wider than their box (cut or ellipsed)."""
    return page.evaluate("""(sel) => Array.from(document.querySelectorAll(sel))
        .filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.textContent)""", selector)


def test_presenter_mode_opens_on_speculation_and_steps_with_the_arrow_keys(page):
    entries = _sample_entries()
    run = dict(entries)[opening_run(entries)]
    req = run.requests[opening_request(run)]
    first = example_step(req) + 1
    _wait_idle(page)
    page.get_by_text("Step through (presenter mode)").click()
    heading = page.get_by_role("heading", name=re.compile(r"^Step \d+ of \d+"))
    sync_api.expect(heading).to_have_count(1)
    sync_api.expect(heading).to_contain_text(f"Step {first} of {len(req.steps)}")
    sync_api.expect(page.locator(".sv-example")).to_have_count(0)  # one step on screen
    assert _cut(page, ".st-key-step_prev button, .st-key-step_next button") == []
    _wait_idle(page)
    page.wait_for_function("() => window.__svArrowKeys === true")  # the page's key listener is in
    page.keyboard.press("ArrowRight")
    sync_api.expect(heading).to_contain_text(f"Step {first + 1} of")
    _wait_idle(page)
    page.keyboard.press("ArrowLeft")
    sync_api.expect(heading).to_contain_text(f"Step {first} of")
    _wait_idle(page)
    page.keyboard.press("ArrowLeft")
    sync_api.expect(heading).to_contain_text(f"Step {first - 1} of")
    _wait_idle(page)
    page.evaluate("() => document.activeElement?.blur()")
    page.screenshot(path=str(ARTIFACTS / "presenter_mode.png"))


@pytest.mark.parametrize("width", [1280, 1440])
def test_the_first_screen_reads_as_code_under_a_headline_with_nothing_cut(browser, app_url, width):
    entries = _sample_entries()
    name = opening_run(entries)
    run = dict(entries)[name]
    pair = race.find_baseline(run, [e for e in entries if e[0] != name])
    context = browser.new_context(viewport={"width": width, "height": 1000})
    p = context.new_page()
    p.set_default_timeout(TIMEOUT_MS)
    try:
        p.goto(app_url)
        sync_api.expect(p.locator(".sv-output").first).to_be_visible()
        _wait_idle(p)
        # the measured result against the paired baseline, on the first screen, the workload named
        head = p.locator(".sv-headline-text")
        sync_api.expect(head).to_be_in_viewport()
        sync_api.expect(head).to_have_text(headline.headline(run, pair.baseline).text)
        # the output reads as code: lines break where the text breaks, indentation kept
        lines = p.locator(".sv-output").first.inner_text().split("\n")
        indented = [ln for ln in lines if ln.startswith("    ") and ln.strip()]
        assert len(lines) > 10 and len(indented) > 5, lines[:20]
        assert any(ln.strip().startswith("def ") and ln.rstrip().endswith(":") for ln in lines), lines[:20]
        # no label cut to an ellipsis, no icon drawn as an emoji
        assert _cut(p, "[data-testid=stMetricLabel] *, [data-testid=stButton] button *") == []
        icons = p.locator("[data-testid=stSidebarNav] [data-testid=stIconMaterial]")
        sync_api.expect(icons).to_have_count(4)
        p.evaluate("() => document.activeElement?.blur()")
        p.wait_for_timeout(1000)  # let plotly settle
        p.screenshot(path=str(ARTIFACTS / f"first_screen_{width}.png"))
        _screenshot(p, ARTIFACTS / f"first_screen_{width}_full.png")
    finally:
        context.close()


@pytest.mark.parametrize("path", ["", "methods", "throughput", "tuning"])
def test_screenshot_of_every_page(browser, app_url, path):
    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    p = context.new_page()
    p.set_default_timeout(TIMEOUT_MS)
    try:
        p.goto(f"{app_url}/{path}")
        sync_api.expect(p.get_by_test_id("stMainBlockContainer").get_by_role("heading").first).to_be_visible()
        _wait_idle(p)
        if path in ("throughput", "tuning"):
            sync_api.expect(p.locator(".main-svg").first).to_be_visible()
        assert p.get_by_test_id("stException").count() == 0
        p.wait_for_timeout(1000)
        _screenshot(p, ARTIFACTS / f"page_{path or 'playground'}.png")
    finally:
        context.close()


def test_a_sweeps_own_prompt_set_shows_after_choosing_it(page, app_url):
    """The Throughput page's prompt set once kept showing 'chat' after a code sweep was chosen, while the
    charts drew 'code' (the remembered choice was deleted, and the browser kept its own)."""
    prompt_set = {p.parent.name: load_sweep(p).cells[0].prompt_set for p in list_sweep_files()}
    first = next(iter(prompt_set))  # the page opens on it
    other = next((name for name, shown in prompt_set.items() if shown != prompt_set[first]), None)
    if other is None:
        pytest.skip("needs two recorded sweeps of different prompt sets")
    page.goto(f"{app_url}/throughput")
    shown = page.locator(".st-key-tp_prompt_set").get_by_role("combobox")
    sync_api.expect(shown).to_have_value(prompt_set[first])
    box = page.locator(".st-key-tp_sweep").get_by_role("combobox")
    box.click()
    box.type(other)
    page.get_by_role("option", name=other, exact=True).click()
    _wait_idle(page)
    sync_api.expect(shown).to_have_value(prompt_set[other])


def test_the_server_log_has_no_tracebacks(app_server):
    """Runs last (pytest keeps file order): after every page above, the server's log holds no traceback,
    such as the `ModuleNotFoundError: torchvision` that Streamlit's file watcher caused on each rerun
    (.streamlit/config.toml turns it off)."""
    log = app_server[1].read_text(errors="replace")
    assert "Traceback" not in log and "ModuleNotFoundError" not in log, log[-3000:]


def test_a_bfloat16_tie_is_outlined_with_both_candidates_on_hover(page):
    """The Playground on a recorded bfloat16 pair that parts: the note says it is a tie in plain words, and the
    token where the outputs part is outlined, its hover text giving both runs' scores of the two candidates."""
    name = "showcase-bf16-xeon-k8-c4/ngram-k8-c4.json.gz"
    _select_run_file(page, name)
    _wait_idle(page)
    sync_api.expect(page.get_by_text("a tie in bfloat16").first).to_be_visible()
    marked = page.locator(".sv-output span.sv-diverge").first
    sync_api.expect(marked).to_be_visible()
    title = marked.get_attribute("title")
    assert title.startswith("the outputs part here: the baseline wrote") and "logprob" in title
    marked.scroll_into_view_if_needed()
    _screenshot(page, ARTIFACTS / "divergence_tie_1440.png")
