"""The MLflow UI in a real headless browser (Debian's chromium, driven by Selenium).

The session's grid sweep and `python -m benchflow ui` (MLflow's own server) over the
sweep's default store; the experiment link that command prints must open the runs
table, which shows the sweep's parent run, its child runs folded under it, and, once
the column is picked with "Columns", each child's `headline.per_iter_time_s` as the
browser prints the value MLflow stored, and its `cpu.features` tag likewise. Rows and
columns are found by their text (run names, the column's header); a row's `row-id` is
its run id. The screenshot is kept at test-artifacts/mlflow_ui_experiment.png, after a
failure too.

Needs /usr/bin/chromium and /usr/bin/chromedriver (`make browser`, which `make test`
runs, installs them with apt); without them the browser test is skipped, loudly.
Then a SIGTERM to that `benchflow ui` process alone must end every MLflow process it
started: the same server, so the suite starts one UI, not two.
"""

from __future__ import annotations

import atexit
import re
import signal
import sys
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import (
    REPO,
    SESSION_RUNS,
    CliResult,
    EarlySweeps,
    ServerProcess,
    SessionSweep,
    early,
    free_port,
)
from tests.test_ui_cli import signal_ends_every_mlflow_process

# Debian's browser and its matching driver (`apt-get install chromium chromium-driver`).
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
SCREENSHOTS = REPO / "test-artifacts"
# Each browser test's screenshot, kept after it (the MLflow UI's under its old name).
SCREENSHOT_OF = {
    "test_experiment_page_shows_child_runs_and_a_metric": "mlflow_ui_experiment.png",
    "test_history_dashboard_renders_and_links_its_change_points": "history_dashboard.png",
    "test_the_mlflow_ui_of_the_postgresql_server_shows_the_sweep": "mlflow_ui_postgresql.png",
}
METRIC = "headline.per_iter_time_s"
TAG = "cpu.features"  # a provenance fact, as a tag (results/environment.py)


def _missing() -> str | None:
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "the selenium package (`make setup` installs it, with the dev group)"
    for path in (CHROMIUM, CHROMEDRIVER):
        if not path.exists():
            return str(path)
    return None


MISSING = _missing()
if MISSING is None:
    from selenium import webdriver
    from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait


@pytest.fixture(scope="module")
def sweep(grid_sweep: SessionSweep) -> CliResult:
    """The session's grid sweep (tests/conftest.py: GRID): ten child runs in its default
    store, eight with the headline metric and two invalid pairs without."""
    return grid_sweep.result


@early("grid_ui")
def _ui_over_the_grid(root: Path) -> ServerProcess | str:
    """`python -m benchflow ui` over the grid sweep's default store, on a free port, with
    its default single server worker (the last test here stops it with a signal; two
    workers are stopped in test_ui_cli.py, full suite). Started as soon as
    the sweep has made its MLflow parent run (the experiment whose link the command
    prints), so the server's start overlaps the sweep; it reads the store when asked."""
    deadline = time.monotonic() + 1200
    while "grid" not in SESSION_RUNS:
        if time.monotonic() > deadline:
            return "the grid sweep never started"
        time.sleep(0.5)
    grid = SESSION_RUNS["grid"]
    while not list(grid.cwd.glob("multirun/*/*/mlflow_parent_run.txt")):
        if grid.proc.poll() is not None or time.monotonic() > deadline:
            return f"the grid sweep made no MLflow parent run (exit {grid.proc.poll()})"
        time.sleep(0.5)
    port = free_port()
    cmd = [sys.executable, "-m", "benchflow", "ui", "--port", str(port)]
    server = ServerProcess(cmd, port, grid.cwd / "ui.log", cwd=grid.cwd)
    atexit.register(server.stop)  # stopped even if no test gets to use it
    server.start()
    return server


@pytest.fixture(scope="module")
def ui(sweep: CliResult, early_sweeps: EarlySweeps) -> Iterator[ServerProcess]:
    server = early_sweeps.result("grid_ui")
    assert isinstance(server, ServerProcess), server
    yield server
    server.stop()


@pytest.fixture
def browser(capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest) -> Iterator[Any]:
    if MISSING is not None:
        pytest.skip(
            f"\n{'!' * 78}\nMLFLOW UI BROWSER TEST SKIPPED: {MISSING} is missing. Install "
            "Debian's chromium and its driver with `make browser` (as root: apt-get install "
            f"chromium chromium-driver).\n{'!' * 78}"
        )
    screenshot = SCREENSHOTS / SCREENSHOT_OF[request.node.name]
    screenshot.unlink(missing_ok=True)  # never mistake an old screenshot for this run's
    options = Options()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage"):
        options.add_argument(arg)
    options.add_argument("--window-size=1600,1000")
    # The driver path is given, so Selenium Manager never tries to download one.
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        SCREENSHOTS.mkdir(exist_ok=True)
        driver.save_screenshot(str(screenshot))  # after a failure too: what it showed
        with capsys.disabled():
            print(f"\nscreenshot ({driver.current_url}): {screenshot}")
        driver.quit()


def as_browser_prints(value: float) -> str:
    """A float as JavaScript's Number#toString prints it, as the runs table shows metrics:
    the shortest digits that round-trip (as Python's repr), in plain decimal notation
    for 1e-7 <= |value| < 1e21."""
    if value == int(value) and abs(value) < 1e21:
        return str(int(value))
    if 1e-7 <= abs(value) < 1e21:
        return format(Decimal(repr(value)), "f")
    mantissa, _, exponent = repr(value).partition("e")
    return f"{mantissa}e{int(exponent):+d}"


def test_as_browser_prints() -> None:
    assert as_browser_prints(0.003145043498079758) == "0.003145043498079758"
    assert as_browser_prints(3e-05) == "0.00003"
    assert as_browser_prints(1.5e-08) == "1.5e-8"
    assert as_browser_prints(162795.84060207987) == "162795.84060207987"
    assert as_browser_prints(2.0) == "2"


def _row(name: str) -> tuple[str, str]:
    """The runs table's row (role=row) that shows this run name."""
    return By.XPATH, f"//*[@role='row'][.//*[normalize-space()='{name}']]"


def _run_row(run: Any) -> tuple[str, str]:
    """The runs table's row of this run (its `row-id` is the run id)."""
    return By.XPATH, f"//*[@role='row'][@row-id='{run.info.run_id}']"


def test_experiment_page_shows_child_runs_and_a_metric(
    sweep: CliResult, ui: ServerProcess, browser: Any
) -> None:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{sweep.cwd / 'mlflow.db'}")
    exp = client.get_experiment_by_name("benchflow")
    assert exp is not None
    runs = client.search_runs([exp.experiment_id])
    (parent,) = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert sorted(c.info.run_name for c in children) == sorted(
        r["job"]["name"] for r in sweep.rows()
    )
    timed = [c for c in children if METRIC in c.data.metrics]
    assert len(children) == 10 and len(timed) == 8  # the invalid pairs have no time

    # `benchflow ui` prints the experiment's link: MLflow 3 opens an experiment in its
    # GenAI (traces) view unless the link asks for "Model training", which has the runs.
    links = re.findall(r"runs of experiment benchflow: (\S+)", ui.log.read_text())
    assert links == [f"{ui.url}/#/experiments/{exp.experiment_id}?workflowType=machine_learning"]
    experiment_page_shows(browser, links[0], parent, children, timed)


def experiment_page_shows(
    browser: Any, link: str, parent: Any, children: list[Any], timed: list[Any]
) -> None:
    """The runs table at `link` (an experiment's page) shows the sweep's run with its
    child runs folded under it, each child's headline metric (the `timed` ones) as
    MLflow stored it, and each child's CPU features tag."""
    browser.get(link)
    wait = WebDriverWait(browser, 60)

    # The sweep's parent run is a row; its child runs are folded under it.
    parent_row = wait.until(
        ec.visibility_of_element_located(_row(parent.info.run_name)),
        f"no row shows the sweep's run name {parent.info.run_name!r}",
    )
    assert parent_row.get_attribute("row-id") == parent.info.run_id
    for run in children:
        assert not browser.find_elements(*_run_row(run)), f"{run.info.run_name} is not nested"
    for close in browser.find_elements(
        By.CSS_SELECTOR, "[data-component-id='mlflow.assistant.chat_panel.close']"
    ):
        if close.is_displayed():  # fold MLflow's assistant side panel: room for the table
            close.click()
    name_cell = f"//*[@role='gridcell'][.//*[normalize-space()='{parent.info.run_name}']]"
    browser.find_element(By.XPATH, f"{name_cell}//button").click()  # unfold the sweep
    for run in children:  # two runs may share a name (an invalid pair): found by id
        row = wait.until(
            ec.visibility_of_element_located(_run_row(run)),
            f"no row for the child run {run.info.run_name!r} after unfolding the sweep",
        )
        assert run.info.run_name in row.text, (run.info.run_name, row.text)

    # Show the metric as a column, and the CPU's features (a tag, the provenance fact
    # that tells a fast VM from an AVX2-only one): Columns -> search -> pick it.
    # Each child's cell in that column shows the value MLflow stored, as the browser
    # prints it.
    column = _show_column(browser, wait, METRIC)
    _cells_show(browser, column, {r: as_browser_prints(r.data.metrics[METRIC]) for r in timed})
    column = _show_column(browser, wait, TAG)
    assert all(c.data.tags[TAG] for c in children)
    _cells_show(browser, column, {r: r.data.tags[TAG] for r in children})


def _show_column(browser: Any, wait: Any, name: str) -> str:
    """Pick a column by its name in the runs table's "Columns" menu; its col-id."""
    browser.find_element(By.XPATH, "//button[normalize-space()='Columns']").click()
    search = wait.until(
        ec.visibility_of_element_located((By.CSS_SELECTOR, "input[placeholder='Search columns']")),
        "'Columns' opened no 'Search columns' box",
    )
    search.send_keys(name)
    wait.until(
        ec.element_to_be_clickable((By.XPATH, f"//*[normalize-space(text())='{name}']")),
        f"the column picker offers no {name}",
    ).click()
    search.send_keys(Keys.ESCAPE)
    header = wait.until(
        ec.visibility_of_element_located(
            (By.XPATH, f"//*[@role='columnheader'][@col-id][normalize-space()='{name}']")
        ),
        f"no column header {name} after picking it",
    )
    return str(header.get_attribute("col-id"))


def _cells_show(browser: Any, column: str, expected: dict[Any, str]) -> None:
    """Each run's cell in the column shows its expected text. Cells are found again at
    each poll: the table re-renders when MLflow refreshes the runs."""
    poll = WebDriverWait(browser, 60, ignored_exceptions=[StaleElementReferenceException])
    for run, text in expected.items():
        cell = (By.XPATH, _run_row(run)[1] + f"//*[@role='gridcell'][@col-id='{column}']")

        def shows(driver: Any, cell: tuple[str, str] = cell, text: str = text) -> bool:
            return bool(driver.find_element(*cell).text.strip() == text)

        try:
            poll.until(shows)
        except TimeoutException:
            shown = [e.text for e in browser.find_elements(*cell)]
            name = run.info.run_name
            pytest.fail(f"{name}: {column} is {text} in MLflow, the page shows {shown}")


def test_a_sigterm_to_benchflow_ui_alone_ends_every_mlflow_process(ui: ServerProcess) -> None:
    """After the browser (or with no browser installed), the UI it used is stopped as
    `kill PID` or a scheduler would: test_ui_cli.py says what must hold."""
    signal_ends_every_mlflow_process(ui, signal.SIGTERM, 143, workers=1)


def test_history_dashboard_renders_and_links_its_change_points(
    browser: Any, tmp_path: Path
) -> None:
    """`benchflow history`'s page in chromium: its plots render (inline SVG with a size),
    the change point's band and line are drawn, and the open change point's row links
    to its model's plot, which the click brings into view."""
    from tests.test_history import _history, history_changes

    from benchflow.cli.history import main as history_main
    from benchflow.history.dashboard import change_id, model_anchor

    root = _history(tmp_path, 12, 8)
    assert history_main([str(root), "--out", str(tmp_path / "h"), "--no-mlflow"]) == 0
    (change,) = history_changes(root)
    browser.get((tmp_path / "h" / "history.html").as_uri())
    wait = WebDriverWait(browser, 30)
    figures = browser.find_elements(By.CSS_SELECTOR, "figure svg")
    assert len(figures) == 3  # one configuration, two models
    assert all(f.size["width"] > 300 and f.size["height"] > 100 for f in figures)
    line = browser.find_element(By.ID, change_id(change))
    assert line.size["height"] > 50  # the dashed line spans the plot
    assert browser.find_element(By.ID, f"band-{change.series.fingerprint[:12]}")
    assert browser.execute_script("return window.scrollY") == 0
    link = browser.find_element(By.CSS_SELECTOR, "a.change")
    assert link.text == change.series.name
    link.click()
    anchor = model_anchor(change.series)
    wait.until(lambda d: d.current_url.endswith(f"#{anchor}"))
    top, height = browser.execute_script(
        f"return [document.getElementById('{anchor}').getBoundingClientRect().top, "
        "window.innerHeight]"
    )
    # the page scrolled to the model's plot (or as far as the page goes)
    assert browser.execute_script("return window.scrollY") > 0
    assert 0 <= top < height / 2, (top, height)
