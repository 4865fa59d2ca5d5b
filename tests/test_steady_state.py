"""Steady state is checked, not assumed: a model that recompiles on its second call
(a buffer changes dtype on the first forward, as in TorchBench's llama) is flagged
when a timed repeat compiles, and adaptive warm-up gets its steady-state time right.
Compile caches are cold per job by default, warm (shared) on request. The host
allocator does not page-fault a steady step's temporaries."""

from __future__ import annotations

import dataclasses
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import SEARCHPATH, SessionSweep, run_cli

from benchflow.harness.timing import compiled, settled
from benchflow.report.entry import timing_flags
from benchflow.report.model import build_report
from benchflow.results.row import ResultRow

RECOMPILES = [
    SEARCHPATH,
    "model=recompiles",
    "model.size=tiny",
    "dtype=float32",
    "warmup=0",
    "repeat=3",
    "iterations_per_run=2",
    "mlflow.enabled=false",
]


def test_compiled_names_what_compiled() -> None:
    assert compiled({"xla_CompileTime_number": 2.0}) == "XLA compiled 2 graph(s)"
    assert compiled({"dynamo_unique_graphs": 1.0, "dynamo_frames_ok": 1.0}) == (
        "dynamo made 1 new graph(s)"
    )
    assert compiled({"dynamo_compile_time_s": 0.25}) == "dynamo/Inductor compiled for 0.250 s"
    assert compiled({"xla_CompileTime_number": 0.0, "dynamo_unique_graphs": 0.0}) is None


def test_settled_and_ci() -> None:
    assert not settled([1.0] * 5)  # too few steps
    assert settled([5.0, 1.00, 1.02, 0.99, 1.01, 1.0, 0.98])
    # a step a busy host preempted (3x) does not keep the warm-up going
    assert settled([1.00, 3.0, 1.02, 0.99, 1.01, 1.0])
    assert not settled([2.0, 1.8, 1.6, 1.4, 1.2, 1.0])  # still speeding up
    assert not settled([1.0, 1.0, 1.0, 1.5, 1.5, 1.5])  # a step change


@pytest.fixture(scope="module")
def compiled_rows(cases_sweep: SessionSweep) -> list[dict[str, Any]]:
    """The recompiling model compiled by dynamo (aot_eager: the recompile is dynamo's,
    whichever backend; Inductor's C++ build adds only time), fixed and adaptive warm-up
    (session sweep)."""
    return [cases_sweep.case("recompiles_fixed"), cases_sweep.case("recompiles_adaptive")]


def _by_mode(rows: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    fixed, adaptive = rows  # as the fixture lists them
    assert fixed["config"]["adaptive_warmup"] is False
    assert adaptive["config"]["adaptive_warmup"] is True
    return fixed, adaptive


def test_a_recompile_in_a_timed_repeat_is_flagged(compiled_rows: list[dict[str, Any]]) -> None:
    fixed, _ = _by_mode(compiled_rows)
    timing = fixed["timing"]
    assert fixed["status"] == "ok" and timing["steady_state"] is False
    assert timing["warmup_steps"] == 0 and timing["warmup_settled"] is None
    ((where),) = timing["unsteady_repeats"]
    assert where["repeat"] == 0 and "dynamo made 1 new graph" in where["reason"]
    series = fixed["metrics"]["per_iter_time_s"]
    # the recompile landed in repeat 0: far slower than the quickest steady repeat (not
    # the slowest: under the suite's load a steady one once took 0.035 s to its 0.164 s)
    assert series[0] > 5 * min(series[1:])
    assert fixed["metrics"]["dynamo_unique_graphs"] == [1.0, 0.0, 0.0]
    flags = timing_flags(ResultRow.from_dict(fixed))
    assert flags[0].startswith("not steady: repeat 0 dynamo made 1 new graph")


def test_adaptive_warmup_reaches_the_steady_state(compiled_rows: list[dict[str, Any]]) -> None:
    fixed, adaptive = _by_mode(compiled_rows)
    timing = adaptive["timing"]
    assert timing["steady_state"] is True and timing["unsteady_repeats"] == []
    # call 1 is the cold start, call 2 recompiles, then 6 quiet steps whose two halves agree
    assert timing["warmup_settled"] is True and timing["warmup_steps"] >= 6, timing
    assert adaptive["metrics"]["dynamo_unique_graphs"] == [0.0, 0.0, 0.0]
    steady = statistics.median(fixed["metrics"]["per_iter_time_s"][1:])
    got = adaptive["summary"]["per_iter_time_s"]["median"]
    # near the steady time, far from a recompile's (> 5x a steady step, as above); the
    # margin is wide because the session's other sweep runs beside this tiny model
    assert 0.25 * steady < got < 4 * steady, (got, steady)
    flags = timing_flags(ResultRow.from_dict(adaptive))
    assert not flags or flags[0].startswith("noisy")


def test_the_report_flags_the_unsteady_row_and_keeps_it_out_of_the_geomean(
    compiled_rows: list[dict[str, Any]],
) -> None:
    report = build_report([ResultRow.from_dict(r) for r in compiled_rows], baseline="aot_eager")
    flagged = [e for e in report.entries if e.flags]
    unsteady = [e for e in flagged if e.row.timing and e.row.timing.steady_state is False]
    assert unsteady and all("not steady" in e.note for e in unsteady)
    # Noise is no flag (the interval carries it): only the unsteady row is flagged, and
    # the summary names it among the models its geomean leaves out.
    assert [e for e in flagged if e not in unsteady] == []
    assert any("have a biased median" in n for n in report.notes)
    left_out = {m for s in report.summaries for m, _ in s.left_out}
    assert {e.model for e in unsteady if e.config.backend != "aot_eager"} <= left_out


def test_lazy_xla_recompile_is_flagged_by_xla_compile_count(cases_sweep: SessionSweep) -> None:
    row = cases_sweep.case("recompiles_lazy_xla")
    assert row["timing"]["steady_state"] is False
    assert row["timing"]["unsteady_repeats"][0]["repeat"] == 0
    assert "XLA compiled" in row["timing"]["unsteady_repeats"][0]["reason"]
    assert row["metrics"]["xla_CompileTime_number"][0] >= 1
    assert row["metrics"]["xla_CompileTime_number"][1] == 0


@pytest.mark.full
def test_compile_cache_cold_per_job_and_warm_when_shared(tmp_path: Path) -> None:
    """The same graphs compiled by 4 jobs in order (warm, cold, warm, cold): only the
    second warm job is served by the cache; cold jobs always compile from scratch."""
    res = run_cli(
        [
            "-m",
            *RECOMPILES,
            "dynamo=inductor",
            "adaptive_warmup=false,true",
            "compile_cache=warm,cold",
        ],
        tmp_path,
        BENCHFLOW_CACHE_DIR=str(tmp_path / "shared-cache"),
    )
    assert res.returncode == 0, res.stderr[-3000:]
    rows = sorted(res.rows(), key=lambda r: r["job"]["num"])
    caches = [r["timing"]["compile_cache"] for r in rows]
    assert caches == ["warm", "cold", "warm", "cold"]
    hits = [r["metrics"]["cold_inductor_fxgraph_cache_hit"] for r in rows]
    misses = [r["metrics"]["cold_inductor_fxgraph_cache_miss"] for r in rows]
    assert hits == [0, 0, hits[2], 0] and hits[2] >= 1, hits
    assert misses[0] >= 1 and misses[1] >= 1 and misses[3] >= 1, misses
    assert (tmp_path / "shared-cache" / "inductor").is_dir()
    assert not list((tmp_path / "multirun").glob("*/*/*/.compile_cache"))  # cold ones removed


def _sleeper(seconds: list[float]) -> Any:
    """A step that takes the given times in turn (real sleeps on the real timing loop)."""
    import itertools
    import time

    times = itertools.cycle(seconds)
    return lambda: time.sleep(next(times))


def test_sampling_stops_at_precision_at_its_cap_and_at_the_given_count() -> None:
    from benchflow.backends.device import Device
    from benchflow.harness.timing import Sampling, measure

    common = {"warmup": 0, "probes": [], "trace_time": False}
    # 50 ms steps: a busy host (the session sweeps beside this test) oversleeps, by 20 ms
    # once in a fresh clone's suite; six repeats' interval is their whole range, so the
    # target lets one sample oversleep by up to a step.
    steady = measure(
        _sleeper([0.05]), Device(),
        sampling=Sampling(iterations_per_run=1, max_repeat=12, target_ci=1.0), **common,
    )  # fmt: skip
    assert len(steady.per_repeat["per_iter_time_s"]) == 6  # tight once it has an interval
    assert steady.stop == "precision" and steady.ci_rel is not None and steady.ci_rel <= 1.0
    # the host's reference step, timed around the repeats (a fraction of a millisecond)
    assert steady.host_reference_s is not None and 0 < steady.host_reference_s < 0.05
    noisy = measure(
        _sleeper([0.001, 0.010]), Device(),
        sampling=Sampling(iterations_per_run=1, max_repeat=12, target_ci=0.02), **common,
    )  # fmt: skip
    assert len(noisy.per_repeat["per_iter_time_s"]) == 12  # never tight: stopped by the cap
    assert noisy.stop == "cap" and noisy.ci_rel is not None and noisy.ci_rel > 0.02
    spent = measure(
        _sleeper([0.001, 0.010]), Device(),
        sampling=Sampling(iterations_per_run=1, target_ci=0.02, timed_budget_s=0.001), **common,
    )  # fmt: skip
    # spent at once, yet the fewest repeats an interval needs are taken first
    assert spent.stop == "budget" and len(spent.per_repeat["per_iter_time_s"]) == 6
    # one of a job's 3 processes: its median is one sample of the job's interval, so it
    # stops on its share of the budget after pyperf's 3 values, and still at the cap
    share = Sampling(iterations_per_run=1, target_ci=0.02, processes=3, max_repeat=6)
    slow = measure(
        _sleeper([0.001, 0.010]), Device(),
        sampling=dataclasses.replace(share, timed_budget_s=0.001), **common,
    )  # fmt: skip
    assert slow.stop == "budget" and len(slow.per_repeat["per_iter_time_s"]) == 3
    fast = measure(_sleeper([0.001, 0.010]), Device(), sampling=share, **common)
    assert fast.stop == "cap" and len(fast.per_repeat["per_iter_time_s"]) == 6
    fixed = measure(
        _sleeper([0.001, 0.010]), Device(),
        sampling=Sampling(repeat=3, iterations_per_run=1, target_ci=0.02), **common,
    )  # fmt: skip
    assert len(fixed.per_repeat["per_iter_time_s"]) == 3 and fixed.stop == "count"
    assert fixed.ci_rel is None  # 3 repeats have no 95% interval of their median
    at_least = measure(
        _sleeper([0.001, 0.010]), Device(),
        sampling=Sampling(repeat=8, adaptive_repeat=True, iterations_per_run=1, max_repeat=10),
        **common,
    )  # fmt: skip
    assert len(at_least.per_repeat["per_iter_time_s"]) == 10 and at_least.stop == "cap"


def test_calibration_makes_a_repeat_last_its_minimum() -> None:
    from benchflow.backends.device import Device
    from benchflow.harness.timing import Sampling, calibrate, measure

    steps, step_s, taken = calibrate(_sleeper([0.002]), Device(), 0.03)
    # 2 ms steps (a sleep wakes late, the more so on a busy host): the run found lasts
    # 0.03 s, and never took more than 16 steps (15 of at least 2 ms each are enough)
    assert steps * step_s >= 0.03 and steps <= 16 and step_s >= 0.002, (steps, step_s)
    assert taken >= steps
    m = measure(
        _sleeper([0.002]), Device(), sampling=Sampling(repeat=2, min_run_time_s=0.03),
        warmup=0, probes=[], trace_time=False,
    )  # fmt: skip
    assert m.calibrated and m.iterations_per_run <= 16  # its own calibration
    # each repeat runs the steps its calibration found (each sleeps 2 ms at least). Not
    # "lasts 0.03 s": a calibration run whose sleeps woke late on a loaded host finds
    # fewer steps, and a quieter repeat after it is shorter (0.021 s once, in a suite)
    assert min(m.per_repeat["total_time_s"]) >= m.iterations_per_run * 0.002
    given = measure(
        _sleeper([0.002]), Device(), sampling=Sampling(repeat=2, iterations_per_run=3),
        warmup=0, probes=[], trace_time=False,
    )  # fmt: skip
    assert not given.calibrated and given.iterations_per_run == 3 and given.calibration_steps == 0


def test_before_timed_runs_between_the_warm_up_and_the_timed_repeats() -> None:
    """measure's `before_timed` (the job's child stops Inductor's compile workers there)
    runs once the warm-up has ended and before the calibration and the repeats: the
    steps' clocks say where it ran, and its seconds are kept; None where it did nothing."""
    import time

    from benchflow.backends.device import Device
    from benchflow.harness.timing import Sampling, measure

    at: list[float] = []
    steps: list[float] = []
    sleep = _sleeper([0.002])

    def step() -> object:
        steps.append(time.monotonic())
        return sleep()

    def stop() -> float:
        at.append(time.monotonic())
        return 0.25

    m = measure(
        step, Device(), sampling=Sampling(repeat=2, iterations_per_run=2),
        warmup=2, probes=[], trace_time=False, before_timed=stop,
    )  # fmt: skip
    # the cold call and 2 warm-up steps before it; the 2 repeats of 2 steps after it
    assert len(at) == 1 and len(steps) == 7, (at, steps)
    assert max(steps[:3]) <= at[0] <= min(steps[3:]), (at, steps)
    assert m.before_timed_s == 0.25
    quiet = measure(
        _sleeper([0.002]), Device(), sampling=Sampling(repeat=2, iterations_per_run=2),
        warmup=0, probes=[], trace_time=False,
    )  # fmt: skip
    assert quiet.before_timed_s is None


def test_slowdown_makes_every_timed_step_slower_by_its_fraction() -> None:
    from benchflow.backends.device import Device
    from benchflow.harness.timing import Sampling, measure

    def busy_step() -> None:  # 5 ms of host work: no sleep's late wake-up
        import time

        end = time.perf_counter() + 0.005
        while time.perf_counter() < end:
            pass

    args = {"warmup": 1, "probes": [], "trace_time": False}
    # Plain and slowed measurements in turn, so that the host's load (other tests run
    # beside this one) falls on both alike; the fastest repeats of each, since
    # preemption only adds time. One step a repeat: a repeat of 5-6 ms is seldom
    # preempted, and the spin grows by a fifth of any preemption before it (CI once
    # saw every slowed repeat of four steps 1.5x the plain one on a loaded host).
    plain, slowed = [], []
    for _ in range(6):
        for rule, into in (
            (Sampling(repeat=5, iterations_per_run=1), plain),
            (Sampling(repeat=5, iterations_per_run=1, slowdown=0.2), slowed),
        ):
            into += measure(busy_step, Device(), sampling=rule, **args).per_repeat[
                "per_iter_time_s"
            ]
    ratio = min(slowed) / min(plain)
    assert 1.12 < ratio < 1.35, ratio


ALLOCATOR = r"""
import ctypes, resource
import torch
from benchflow.harness.process import M_MMAP_THRESHOLD, M_TRIM_THRESHOLD, set_host_allocator

def faults_per_step():
    seen = []
    for _ in range(6):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        temps = [torch.ones(512 * 1024) for _ in range(16)]  # 16 live 2 MiB temporaries
        del temps
        seen.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    return min(seen[2:])

# glibc's starting values, pinned: it raises them after the process frees a large block,
# which importing torch may or may not have done (the history the setting removes).
mallopt = ctypes.CDLL(None).mallopt
assert mallopt(M_MMAP_THRESHOLD, 128 * 1024) and mallopt(M_TRIM_THRESHOLD, 128 * 1024)
default = faults_per_step()
left = set_host_allocator("glibc")  # host_allocator=glibc: as it was
faults_per_step()
glibc = faults_per_step()
ok = set_host_allocator("steady")
faults_per_step()
print(default, left, glibc, ok, faults_per_step())
"""


@pytest.mark.skipif(sys.platform != "linux", reason="glibc's malloc")
def test_a_jobs_host_allocations_stop_page_faulting_in_steady_state() -> None:
    """A step's 2 MiB temporaries: glibc's defaults map and unmap them (thousands of page
    faults a step, whatever the step computes); the child's mallopt settings keep them, and
    host_allocator=glibc leaves glibc's own."""
    out = subprocess.run(
        [sys.executable, "-c", ALLOCATOR], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    default, left, glibc, ok, steady = out.stdout.split()
    assert int(default) > 1000  # 16 x 512 pages: the cost the setting removes
    assert left == "True" and int(glibc) > 1000
    assert ok == "True" and int(steady) == 0
