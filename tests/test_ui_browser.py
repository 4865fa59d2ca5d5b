"""The MLflow UI in a real headless browser (Debian's chromium, driven by Selenium).

A small real sweep, then `python -m benchflow ui` (MLflow's own server) over its
store; the experiment's runs page must show the sweep's parent run, its child runs
nested under it, and a child's `headline.per_iter_time_s` with the value MLflow
stored. The screenshot is kept in test-artifacts/ (on failure too).

Needs /usr/bin/chromium and /usr/bin/chromedriver (`make browser`, which `make test`
runs, installs them with apt); without them the test is skipped, loudly.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import REPO, SEARCHPATH, CliResult, ServerProcess, free_port, run_cli

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
SCREENSHOT = REPO / "test-artifacts" / "mlflow_ui_experiment.png"
METRIC = "headline.per_iter_time_s"


def _missing() -> str | None:
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "the selenium package (uv sync --locked installs it with the dev group)"
    for path in (CHROMIUM, CHROMEDRIVER):
        if not Path(path).exists():
            return path
    return None


if (missing := _missing()) is not None:
    pytest.skip(
        f"\n{'!' * 78}\nBROWSER TEST SKIPPED: {missing} is missing. Install Debian's browser "
        "with `make browser` (apt-get install chromium chromium-driver, as root).\n"
        f"{'!' * 78}",
        allow_module_level=True,
    )

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.options import Options  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support import expected_conditions as ec  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> CliResult:
    cwd = tmp_path_factory.mktemp("ui")
    res = run_cli(
        [
            "-m",
            SEARCHPATH,
            "model=matmul_chain",
            "model.size=tiny",
            "xla=none,PJRT",
            "repeat=2",
            "iterations_per_run=2",
            "warmup=1",
        ],
        cwd,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    return res


@pytest.fixture(scope="module")
def ui(sweep: CliResult) -> Iterator[str]:
    """`python -m benchflow ui` over the sweep's default store, on a free port."""
    port = free_port()
    cmd = [sys.executable, "-m", "benchflow", "ui", "--port", str(port)]
    server = ServerProcess(cmd, port, sweep.cwd / "ui.log", cwd=sweep.cwd)
    yield server.start()
    server.stop()


@pytest.fixture
def browser() -> Iterator[Any]:
    options = Options()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage"):
        options.add_argument(arg)
    options.add_argument("--window-size=1900,1000")
    # The driver path is given, so Selenium Manager never tries to download one.
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        SCREENSHOT.parent.mkdir(exist_ok=True)
        driver.save_screenshot(str(SCREENSHOT))  # after a failure too: what the UI showed
        print(f"screenshot: {SCREENSHOT}")
        driver.quit()


def _run_name_cell(run_id: str) -> str:
    return f"[role=row][row-id='{run_id}'] [col-id^='attributes.`Run Name']"


def test_experiment_page_shows_child_runs_and_a_metric(
    sweep: CliResult, ui: str, browser: Any
) -> None:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{sweep.cwd / 'mlflow.db'}")
    exp = client.get_experiment_by_name("benchflow")
    assert exp is not None
    runs = client.search_runs([exp.experiment_id])
    (parent,) = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = {r.info.run_name: r for r in runs if "mlflow.parentRunId" in r.data.tags}
    assert set(children) == {"matmul_chain·eager·eval", "matmul_chain·lazy_xla·eval"}

    wait = WebDriverWait(browser, 60)
    browser.get(f"{ui}/#/experiments/{exp.experiment_id}/runs")
    # The sweep's parent run is a row of the runs table, its children folded under it.
    parent_cell = wait.until(
        ec.visibility_of_element_located((By.CSS_SELECTOR, _run_name_cell(parent.info.run_id)))
    )
    assert parent.info.run_name in parent_cell.text
    for close in browser.find_elements(By.CSS_SELECTOR, "button[aria-label='Close']"):
        if close.is_displayed():  # fold MLflow's assistant side panel: more room for the table
            close.click()
    parent_cell.find_element(By.TAG_NAME, "button").click()  # unfold the children
    for name, run in children.items():
        cell = wait.until(
            ec.visibility_of_element_located((By.CSS_SELECTOR, _run_name_cell(run.info.run_id)))
        )
        assert name in cell.text

    # Show the headline metric as a column: Columns -> search -> pick it.
    browser.find_element(By.XPATH, "//button[normalize-space()='Columns']").click()
    search = wait.until(
        ec.visibility_of_element_located((By.CSS_SELECTOR, "input[placeholder='Search columns']"))
    )
    search.send_keys(METRIC)
    wait.until(
        ec.element_to_be_clickable((By.XPATH, f"//*[normalize-space(text())='{METRIC}']"))
    ).click()
    search.send_keys(Keys.ESCAPE)

    for run in children.values():
        selector = f"[role=row][row-id='{run.info.run_id}'] [col-id$='{METRIC}`']"
        cell = wait.until(ec.visibility_of_element_located((By.CSS_SELECTOR, selector)))
        wait.until(lambda _d, c=cell: c.text.strip() not in ("", "-"))
        shown = float(cell.text.strip())
        assert shown == pytest.approx(run.data.metrics[METRIC], rel=1e-6), run.info.run_name
