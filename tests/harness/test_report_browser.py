"""report.html and ``harness serve`` in a real browser: Debian's chromium, headless, driven by
selenium through the system chromedriver (issue 36). Skipped, saying why, where either is
missing (``scripts/install test`` installs them).

Each test loads a page, waits for its script to say it is ready, and fails on any error
the browser's console logged.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.html import write_html
from harness.html.serve import make_server
from tests.harness.report_pages import (
    NEW_KIND,
    fifo_events,
    make_results,
    simulate,
    with_new_fault,
    write_run,
)

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver") or (
    "/usr/lib/chromium/chromedriver" if Path("/usr/lib/chromium/chromedriver").exists() else None
)
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        CHROMIUM is None or DRIVER is None,
        reason="Debian's chromium and chromium-driver are not installed (scripts/install test)",
    ),
]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1000"):  # fmt: skip
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    driver.set_script_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def wait_for(driver: Any, script: str, what: str, timeout: float = 30.0) -> Any:
    """The first truthy value of ``script`` (JavaScript returning it) within ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = driver.execute_script(script)
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout:g} s for {what}; last value {value!r}")
        time.sleep(0.05)


def console_errors(driver: Any) -> list[dict]:
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def open_report(driver: Any, url: str, timeout: float = 30.0) -> dict:
    driver.get_log("browser")  # drop what earlier pages logged
    driver.get(url)
    wait_for(
        driver,
        "return (window.rqReport && rqReport.ready) || !!document.getElementById('unpack-error')",
        "the report's script to finish",
        timeout,
    )
    assert not driver.find_elements(By.ID, "unpack-error")
    return driver.execute_script("return rqReport")


def visible_in_viewer(driver: Any, index: int) -> bool:
    """Whether history line ``index`` is drawn, highlighted, inside the viewer's visible box
    and the viewer inside the window."""
    return driver.execute_script(
        """const row = document.querySelector('#hv .hl-row[data-i="' + arguments[0] + '"]');
        if (!row || !row.classList.contains('hit')) return false;
        const r = row.getBoundingClientRect();
        const v = document.getElementById('hv').getBoundingClientRect();
        return r.top >= v.top && r.bottom <= v.bottom && v.top >= 0
          && v.top < window.innerHeight;""",
        index,
    )


def canvas_pixels(driver: Any, rgb: tuple[int, int, int], tol: int = 24) -> int:
    """How many pixels of the timeline's canvas are near ``rgb``."""
    return driver.execute_script(
        """const c = document.getElementById('tl-canvas');
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let n = 0;
        const near = (a, b) => Math.abs(a - b) <= arguments[3];
        for (let i = 0; i < d.length; i += 4)
          if (near(d[i], arguments[0]) && near(d[i + 1], arguments[1])
              && near(d[i + 2], arguments[2]) && d[i + 3] > 200) n++;
        return n;""",
        *rgb,
        tol,
    )


def test_report_page_draws_and_links(browser: Any, tmp_path: Path):
    events = fifo_events()
    root = write_run(tmp_path / "run", events, subject="rqueue", plots=False)
    state = open_report(browser, write_html(root).as_uri())
    assert console_errors(browser) == []
    ops = sum(1 for e in events if e["type"] == "invoke" and e["process"] != "nemesis")
    assert state["drawn"] == ops
    assert canvas_pixels(browser, (0x2E, 0x9D, 0x5B)) > 50, "no ok operation drawn"
    legend = browser.find_element(By.ID, "tl-legend").text
    assert f"fault: {NEW_KIND}" in legend

    example = browser.find_element(By.CSS_SELECTOR, 'a.example[href="#ex-fifo-violation-1"]')
    lines = [int(i) for i in example.get_attribute("data-lines").split(",")]
    example.click()
    wait_for(browser, "return location.hash === '#ex-fifo-violation-1'", "the example's anchor")
    assert browser.execute_script("return rqReport.hits") == lines
    for i in lines:
        assert visible_in_viewer(browser, i), f"history line {i} not shown highlighted"

    browser.execute_script("window.scrollTo(0, 0)")
    line = browser.find_element(By.CSS_SELECTOR, f'a.line[href="#h-{lines[-1]}"]')
    line.click()
    wait_for(browser, f"return location.hash === '#h-{lines[-1]}'", "the line's anchor")
    assert browser.execute_script("return rqReport.hits") == [lines[-1]]
    assert visible_in_viewer(browser, lines[-1])

    # an operation clicked on the timeline: its invoke and completion in the viewer
    canvas = browser.find_element(By.ID, "tl-canvas")
    browser.execute_script("document.getElementById('timeline').scrollIntoView()")
    spot = browser.execute_script("return rqReport.position(0)")
    size = canvas.size
    ActionChains(browser).move_to_element_with_offset(
        canvas, int(spot["x"] - size["width"] / 2), int(spot["y"] - size["height"] / 2)
    ).click().perform()
    hash_ = wait_for(browser, "return location.hash.startsWith('#h-') && location.hash", "a click")
    first = [int(i) for i in hash_[3:].split(",")]
    done = next(e for e in events[1:] if e["process"] == events[0]["process"])
    assert first == [0, done["index"]]  # the first operation: its invoke and its completion
    assert all(visible_in_viewer(browser, i) for i in first)
    assert console_errors(browser) == []


def test_100k_operations_load_and_stay_light(browser: Any, tmp_path: Path):
    events = simulate(1, 200_000)
    end = events[-1]["time"]
    events = with_new_fault(events, end * 0.3, end * 0.4)
    ops = sum(1 for e in events if e["type"] == "invoke" and e["process"] != "nemesis")
    assert ops >= 100_000
    root = write_run(tmp_path / "big", events, subject="rqueue", plots=False)
    page = write_html(root)
    t = time.monotonic()
    state = open_report(browser, page.as_uri(), timeout=60)
    seconds = time.monotonic() - t
    size = page.stat().st_size / 1e6
    print(
        f"\n{ops} operations: report.html {size:.1f} MB, ready {seconds:.2f} s after the "
        f"request ({state['readyAt'] / 1000:.2f} s after navigation; the timeline there after "
        f"{state['timelineAt'] / 1000:.2f} s, drawn in {state['drawMs']:.0f} ms)"
    )
    assert console_errors(browser) == []
    assert state["drawn"] == ops
    assert seconds < 30, f"the page took {seconds:.1f} s to be ready"
    nodes = browser.execute_script("return document.getElementsByTagName('*').length")
    assert nodes < 3000, f"{nodes} DOM nodes for {ops} operations"
    drawn = browser.execute_script(f"return rqReport.zoom({end * 0.5}, {end * 0.5 + 1})")
    assert 0 < drawn < ops / 20
    assert f"fault: {NEW_KIND}" in browser.find_element(By.ID, "tl-legend").text

    box = browser.find_element(By.ID, "hv-filter")
    box.send_keys('"nemesis"')
    label = wait_for(
        browser, "return document.getElementById('hv-count').textContent", "the history filter"
    )
    nemesis = sum(1 for e in events if e["process"] == "nemesis")
    assert label == f"{nemesis} lines hold it"
    browser.execute_script("location.hash = '#h-150000'")
    wait_for(browser, "return rqReport.hits[0] === 150000", "line 150000")
    assert visible_in_viewer(browser, 150000)
    assert console_errors(browser) == []


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Callable[[str], str]]:
    server = make_server(make_results(tmp_path), "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield lambda path: f"http://127.0.0.1:{server.server_address[1]}{path}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_serve_index_filters_and_opens_reports(browser: Any, served: Callable[[str], str]):
    browser.get_log("browser")
    browser.get(served("/"))
    wait_for(browser, "return window.rqIndex && rqIndex.ready", "the index's script")

    def shown() -> list[str]:
        rows = browser.find_elements(
            By.CSS_SELECTOR, "#runs tbody tr:not(.hidden) td:first-child a"
        )
        return sorted(a.text for a in rows)

    assert shown() == ["fifo-1", "m/runs/steady-embedded-rqueue-3", "valid-2"]
    browser.find_element(By.ID, "q").send_keys("lifo")
    assert shown() == ["fifo-1"]
    assert browser.find_element(By.ID, "shown").text == "1 of 3 runs shown"
    browser.find_element(By.ID, "q").clear()
    browser.execute_script("document.getElementById('q').dispatchEvent(new Event('input'))")
    Select(browser.find_element(By.ID, "verdict")).select_by_value("valid")
    assert shown() == ["valid-2"]
    assert "verdict=valid" in browser.current_url  # a filtered index can be linked to
    Select(browser.find_element(By.ID, "verdict")).select_by_value("")
    browser.find_element(By.ID, "q").send_keys("docker 22")
    assert shown() == ["valid-2"]
    assert console_errors(browser) == []

    browser.find_element(By.LINK_TEXT, "valid-2").click()
    wait_for(browser, "return window.rqReport && rqReport.ready", "the report opened")
    assert browser.find_element(By.ID, "verdict").text == "valid"
    assert console_errors(browser) == []

    browser.get(served("/"))
    browser.find_element(By.LINK_TEXT, "m").click()
    cells = browser.find_elements(By.CSS_SELECTOR, "#matrix tbody td")
    assert [c.text for c in cells[:4]] == ["steady", "embedded", "rqueue", "3"]
    browser.find_element(By.LINK_TEXT, "report").click()
    wait_for(browser, "return window.rqReport && rqReport.ready", "the matrix run's report")
    assert console_errors(browser) == []
