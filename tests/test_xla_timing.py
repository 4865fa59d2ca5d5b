"""The seeds' pitfall: a lazy-XLA time must include device execution, not only tracing.

matmul_chain traces 8 ops (microseconds) whose execution costs milliseconds. A
harness that stopped its timer before the device finished reports roughly the
tracing time. This was a real bug: on torch_xla 2.9's PJRT CPU client,
``torch_xla.sync(wait=True)`` returns before graphs launched by earlier
``sync()`` calls finish, so benchflow also waits with ``xm.wait_device_ops()``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tests.conftest import EarlySweeps, SessionSweep, early, python_c

REFERENCE = r"""
import os, time
os.environ["PJRT_DEVICE"] = "CPU"
import torch, torch_xla
from tests.models.faults import MatmulChain
torch.manual_seed(0)
m = MatmulChain(test="eval", device=torch_xla.device(), size="small")
times = []
for i in range(64):  # about a second: its best step is one the other processes left alone
    t = time.perf_counter()
    m.eval().cpu()  # materialize on the host: cannot finish before the device
    times.append(time.perf_counter() - t)
print(min(times[4:]))  # its least disturbed step: it runs beside the session sweeps
"""


@pytest.fixture(scope="module")
def lazy_row(cases_sweep: SessionSweep) -> dict:
    """matmul_chain (small, float32: what the reference below runs) on lazy XLA."""
    return cases_sweep.case("xla_timing")


def test_lazy_xla_time_is_far_above_tracing_time(lazy_row: dict) -> None:
    s = lazy_row["summary"]
    assert lazy_row["experiment"]["xla"] == "PJRT"
    assert s["per_iter_time_s"]["median"] > 10 * s["trace_per_iter_time_s"]["median"]


@early("xla_reference", niced=False)  # a time, compared with the cases sweep's
def _reference(root: Path) -> subprocess.CompletedProcess[str]:
    """The reference's own process, from the first test on (its torch_xla import is
    most of its 15 s)."""
    return subprocess.run(
        [sys.executable, "-c", REFERENCE],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).parent,
    )


def test_lazy_xla_time_covers_a_host_materialized_reference(
    lazy_row: dict, early_sweeps: EarlySweeps
) -> None:
    ref = early_sweeps.result("xla_reference")
    assert ref.returncode == 0, ref.stderr[-2000:]
    reference_s = float(ref.stdout.strip().splitlines()[-1])
    measured_s = lazy_row["summary"]["per_iter_time_s"]["median"]
    # The reference also copies each result to the host, which benchflow's step
    # does not: on 2 cores a step is 7.8 ms of device execution (sync + wait per
    # step, or 4 pipelined steps: the same) and 12.7-15 ms with the copy, so the
    # honest ratio is about 0.5-0.6. A timer that stopped before the device
    # finished gives a small fraction of it (0.02x: 0.23 ms vs ~14 ms). The reference
    # runs beside the session sweeps: once measured at 46 ms (its median) against
    # benchflow's 11.3 ms, hence its best step and a bound well above the bug's 0.02x.
    # Its best of 8 steps (0.2 s) once came out at 95 ms beside the early runs' imports,
    # all 8 disturbed: it now takes its best of 60, over about a second; and that best
    # once came out at 87.6 ms against benchflow's 11.4 ms (0.13x), so the bound is
    # 0.05x: still 2.5 times the bug's 0.02x, which a slowed reference only lowers.
    assert measured_s > 0.05 * reference_s, (measured_s, reference_s)


def test_xla_counters_are_deltas_of_the_timed_region(lazy_row: dict) -> None:
    m = lazy_row["metrics"]
    # One graph executed per step, none compiled after warm-up: steady state.
    assert m["xla_ExecuteTime_number"] == [4.0] * 4
    assert m["xla_CompileTime_number"] == [0.0] * 4
    assert m["cold_xla_CompileTime_number"] >= 1
    assert all(t > 0 for t in m["xla_ExecuteTime_time_s"])
    assert m["first_iter_time_s"] > lazy_row["summary"]["per_iter_time_s"]["min"]


PRECISION = r"""
import json, os
os.environ["PJRT_DEVICE"] = "CPU"
import torch, torch_xla
from benchflow.backends.device import XlaDevice
d, seen = XlaDevice("cpu"), {}
for p in ("medium", "highest", "high"):
    d.set_matmul_precision(p)
    seen[p] = [torch.get_float32_matmul_precision(), torch_xla._XLAC._xla_get_mat_mul_precision()]
print(json.dumps(seen))
"""


@early("xla_precision")
def _precision(root: Path) -> subprocess.CompletedProcess[str]:
    return python_c(PRECISION, timeout=300)


def test_matmul_precision_is_set_for_torch_and_torch_xla(early_sweeps: EarlySweeps) -> None:
    """The experiment runner sets both torch's and torch_xla's matmul precision; so does an
    XLA job (torch_xla's own default, "default", is one bfloat16 pass on a TPU)."""
    out = early_sweeps.result("xla_precision")
    assert out.returncode == 0, out.stderr[-2000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen == {
        "medium": ["medium", "default"],
        "highest": ["highest", "highest"],
        "high": ["high", "high"],
    }
