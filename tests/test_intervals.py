"""The intervals and tests benchflow reports (results/intervals.py), the rule that says
whether the host was quiet (results/load.py), and the pooling of processes=N
(results/pooled.py). Each is checked against values worked out independently: the
binomial distribution's tail for the order-statistics interval, a hand-worked
Benjamini-Hochberg example, and coverage on simulated and recorded samples."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binom

from benchflow.results.child import ChildResult, Timing
from benchflow.results.intervals import (
    ALPHA,
    LEVEL,
    adjust,
    fewest_for_interval,
    geomean_ratio_ci,
    mann_whitney,
    median_ci,
    min_p_value,
    ratio_ci,
)
from benchflow.results.load import OTHER_OWN_LIMIT, STEAL_LIMIT, host_load
from benchflow.results.pooled import pool

DATA = Path(__file__).parent / "data"


def _order_statistic_bounds(n: int) -> tuple[int, int] | None:
    """The 1-based ranks (k, n + 1 - k) of the distribution-free interval of the median:
    the largest k whose two binomial(n, 1/2) tails leave at least 95% between them."""
    found = [k for k in range(1, n // 2 + 1) if 2 * binom.cdf(k - 1, n, 0.5) <= ALPHA]
    return (max(found), n + 1 - max(found)) if found else None


@pytest.mark.parametrize("n", [5, 6, 7, 8, 10, 15, 20, 31, 50])
def test_the_median_interval_is_the_order_statistics_the_binomial_gives(n: int) -> None:
    values = [float(v) for v in np.random.default_rng(n).permutation(np.arange(100, 100 + n))]
    ranks = _order_statistic_bounds(n)
    ci = median_ci(values)
    if ranks is None:
        assert ci is None
        return
    ordered = sorted(values)
    assert ci is not None and ci.level == LEVEL
    assert (ci.low, ci.high) == (ordered[ranks[0] - 1], ordered[ranks[1] - 1])
    assert ci.contains(statistics.median(values))


def test_six_samples_are_the_fewest_with_a_95_interval() -> None:
    assert fewest_for_interval() == 6 == min(n for n in range(1, 20) if _order_statistic_bounds(n))
    assert median_ci([1.0, 2.0, 3.0, 4.0, 5.0]) is None
    ci = median_ci([5.0, 1.0, 3.0, 2.0, 6.0, 4.0])  # six: smallest to largest
    assert ci is not None and (ci.low, ci.high) == (1.0, 6.0)
    assert ci.rel_half_width(3.5) == pytest.approx(2.5 / 3.5)


def test_the_median_interval_covers_the_true_median_95_percent_of_the_time() -> None:
    """Skewed, heavy-tailed draws (as step times are): coverage is at least the level,
    never much above it (order statistics are conservative only by discreteness)."""
    rng = np.random.default_rng(7)
    true_median = math.exp(0.0)  # lognormal(0, 0.5): its median is e^0
    hits = 0
    trials = 1000
    for _ in range(trials):
        ci = median_ci(list(rng.lognormal(0.0, 0.5, size=20)))
        assert ci is not None
        hits += ci.contains(true_median)
    assert 0.935 <= hits / trials <= 0.99


def test_a_ratio_of_medians_interval_covers_the_true_ratio() -> None:
    """Two independent samples, 12 and 15 repeats, true medians 1.0 and 1.25: the
    bootstrap interval of their ratio covers 1.25 in about 95% of trials (percentile
    bootstraps of a median run a little under their level at these sizes)."""
    rng = np.random.default_rng(3)
    trials, hits = 300, 0
    for _ in range(trials):
        den = rng.lognormal(0.0, 0.1, size=12)
        num = 1.25 * rng.lognormal(0.0, 0.1, size=15)
        ci = ratio_ci(list(num), list(den))
        assert ci is not None and ci.low < ci.high
        hits += ci.contains(1.25)
    assert 0.88 <= hits / trials <= 0.995
    assert ratio_ci([1.0], [1.0, 2.0]) is None  # one value: nothing to resample


def test_the_geomean_interval_holds_the_geomean_and_narrows_with_quiet_models() -> None:
    rng = np.random.default_rng(5)

    def pairs(spread: float) -> list[tuple[list[float], list[float]]]:
        return [
            (list(r * rng.lognormal(0, spread, 10)), list(rng.lognormal(0, spread, 10)))
            for r in (0.5, 1.0, 2.0, 4.0)
        ]

    quiet, noisy = geomean_ratio_ci(pairs(0.01)), geomean_ratio_ci(pairs(0.2))
    assert quiet is not None and noisy is not None
    true = math.exp(np.mean(np.log([0.5, 1.0, 2.0, 4.0])))
    assert quiet.contains(true) and noisy.contains(true)
    assert quiet.high - quiet.low < (noisy.high - noisy.low) / 5
    assert geomean_ratio_ci([([1.0, 1.1], [1.0])]) is None  # a side with one value


def test_mann_whitney_and_the_smallest_p_its_sizes_can_reach() -> None:
    # 3 against 3 apart: 2 / C(6, 3) = 0.1, never significant; 5 against 5: 2 / 252
    assert min_p_value(3, 3) == pytest.approx(0.1)
    assert min_p_value(5, 5) == pytest.approx(2 / 252)
    assert min_p_value(0, 4) == 1.0
    assert mann_whitney([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]) == pytest.approx(0.1)
    assert mann_whitney([1, 2, 3, 4, 5], [1.5, 2.5, 3.5, 4.5, 5.5]) > 0.5
    assert mann_whitney([], [1.0]) is None


def test_benjamini_hochberg_adjusts_as_worked_by_hand() -> None:
    """p = 0.01, 0.04, 0.03, 0.2 (m = 4). Sorted, p·m/rank: 0.04, 0.06, 0.0533, 0.2;
    each then the least of itself and those above it: 0.04, 0.0533, 0.0533, 0.2."""
    assert adjust([0.01, 0.04, 0.03, 0.2]) == pytest.approx([0.04, 0.16 / 3, 0.16 / 3, 0.2])
    assert adjust([]) == []


def _windows(n: int, own: float, steal: float = 0.0) -> dict[str, list[float]]:
    return {
        "total_time_s": [1.0] * n,
        "host_other_cpu_own_s": [own] * n,
        "host_steal_s": [steal] * n,
        "host_other_cpu_s": [0.5] * n,
        "host_wait_s": [0.0] * n,
    }


def test_the_host_is_quiet_until_others_or_steal_take_a_share_of_the_jobs_cores() -> None:
    cores = 2
    quiet = host_load(_windows(20, own=0.9 * OTHER_OWN_LIMIT * cores), cores)
    assert quiet is not None and quiet.quiet and quiet.contended == []
    busy = host_load(_windows(20, own=1.1 * OTHER_OWN_LIMIT * cores), cores)
    assert busy is not None and not busy.quiet and len(busy.contended) == 20
    stolen = host_load(_windows(20, own=0.0, steal=1.1 * STEAL_LIMIT * cores), cores)
    assert stolen is not None and not stolen.quiet
    assert stolen.steal_share == pytest.approx(1.1 * STEAL_LIMIT)
    # two contended repeats of twenty: a tenth, still quiet; three are not
    mixed = _windows(20, own=0.0)
    for i in (3, 9):
        mixed["host_other_cpu_own_s"][i] = 1.0
    two = host_load(mixed, cores)
    assert two is not None and two.quiet and two.contended == [3, 9]
    mixed["host_other_cpu_own_s"][15] = 1.0
    three = host_load(mixed, cores)
    assert three is not None and not three.quiet
    assert host_load({"total_time_s": [1.0]}, cores) is None  # no probe: no judgement


def _process_result(times: list[float], first: float, own: float) -> ChildResult:
    n = len(times)
    return ChildResult(
        batch_size=4,
        metrics={
            "per_iter_time_s": times,
            "first_iter_time_s": first,
            **_windows(n, own=own),
        },
        timing=Timing(repeats=n, stop="precision", steady_state=True),
    )


def test_processes_pool_their_samples_and_keep_the_first_cold_call() -> None:
    a = _process_result([1.0, 1.1, 1.2, 1.0], first=9.0, own=0.0)
    b = _process_result([2.0, 2.1, 2.2], first=7.0, own=1.0)  # the busy one
    pooled = pool([a, b], cores=1)
    assert pooled.metrics["per_iter_time_s"] == [1.0, 1.1, 1.2, 1.0, 2.0, 2.1, 2.2]
    assert pooled.metrics["first_iter_time_s"] == 9.0  # the compile: the first process's
    assert pooled.timing is not None and pooled.timing.repeats == 7
    assert pooled.summary["per_iter_time_s"]["median"] == 1.2
    assert pooled.metrics["throughput_samples_per_s"] == pytest.approx(4 / 1.2)
    assert [p["repeats"] for p in pooled.timing.processes or []] == [4, 3]
    host = pooled.timing.host
    assert host is not None and host["contended"] == [4, 5, 6] and not host["quiet"]
    ci = median_ci(pooled.metrics["per_iter_time_s"])
    assert ci is not None and pooled.timing.ci_rel == pytest.approx(ci.rel_half_width(1.2))


def _recorded() -> dict[str, list[float]]:
    """Long series of per-repeat times recorded on this kind of VM (tests/data,
    benchmarks/RESULTS.md says how): job name -> seconds per step, in time order."""
    data = json.loads((DATA / "long_series.json").read_text())
    return {name: list(map(float, series)) for name, series in data["series"].items()}


def _coverage(series: dict[str, list[float]], size: int = 20) -> tuple[int, int]:
    """(windows whose interval holds the whole series' median, windows): each series cut
    into consecutive windows of `size` repeats, about what a default job samples."""
    trials = hits = 0
    for values in series.values():
        long_run = statistics.median(values)
        for start in range(0, len(values) - size + 1, size):
            ci = median_ci(values[start : start + size])
            assert ci is not None
            trials, hits = trials + 1, hits + ci.contains(long_run)
    return hits, trials


def test_the_interval_covers_the_long_run_median_of_real_timing_distributions() -> None:
    """Recorded per-repeat times (skewed, heavy-tailed, several modes: real ones) in a
    random order, so that each window is a fair draw from its job's whole run: the
    interval holds the long-run median in at least 90% of at least 50 windows."""
    rng = np.random.default_rng(11)
    shuffled = {name: list(rng.permutation(v)) for name, v in _recorded().items()}
    hits, trials = _coverage(shuffled)
    assert trials >= 50
    assert hits / trials >= 0.90, f"{hits} of {trials}"
