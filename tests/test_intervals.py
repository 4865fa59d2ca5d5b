"""The intervals and tests benchflow reports (results/intervals.py), the rule that says
whether the host was quiet (results/load.py), and the pooling of processes=N
(results/pooled.py). Each is checked against values worked out independently: the
binomial distribution's tail for the order-statistics interval, a hand-worked
Benjamini-Hochberg example, and coverage on simulated and recorded samples."""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binom

from benchflow.config.schema import DEFAULT_PROCESSES, BenchConfig
from benchflow.results.child import ChildResult, Timing
from benchflow.results.intervals import (
    ALPHA,
    LEVEL,
    Interval,
    Timed,
    adjust,
    compare_times,
    fewest_for_interval,
    geomean_change_test,
    geomean_ratio_ci,
    log_t_interval,
    look_alpha,
    looks,
    mann_whitney,
    median_ci,
    min_p_value,
    out_of_reach,
    paired_geomean_test,
    paired_ratio_test,
    ratio_ci,
    time_interval,
    welch_log_ratio,
)
from benchflow.results.load import (
    OTHER_OWN_LIMIT,
    SPEED_LIMIT,
    STEAL_LIMIT,
    TICK_S,
    host_load,
    speed_change,
)
from benchflow.results.pooled import pool, process_summary

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


def test_the_median_and_process_intervals_are_scipy_stats_own() -> None:
    """median_ci, log_t_interval and the paired test, worked out without importing
    scipy.stats, give scipy.stats.quantile_test's and ttest_1samp's intervals (and
    ttest_1samp's p-value) at every size and level."""
    from scipy.stats import quantile_test, ttest_1samp

    rng = np.random.default_rng(5)
    for level in (0.5, 0.8, 0.9, 0.95, 0.99, 0.999):
        for n in [*range(1, 80), 101, 250, 1000]:
            values = list(rng.lognormal(0.0, 0.3, n))
            ours = median_ci(values, level)
            theirs = quantile_test(values, q=float(np.median(values)), p=0.5)
            low, high = theirs.confidence_interval(level)
            if not (math.isfinite(low) and math.isfinite(high)):
                assert ours is None, (level, n)
            else:
                assert ours is not None and (ours.low, ours.high) == (low, high), (level, n)
            if n >= 2:
                got, want = log_t_interval(values, level), ttest_1samp(np.log(values), 0.0)
                ci = want.confidence_interval(level)
                assert got is not None
                assert got.low == pytest.approx(math.exp(ci.low), rel=1e-12), (level, n)
                assert got.high == pytest.approx(math.exp(ci.high), rel=1e-12), (level, n)
                # the paired test's Student's t: ttest_1samp's p-value and interval too
                ones = (1.0,) * n
                paired = paired_ratio_test(
                    Timed(tuple(values), tuple(values)), Timed(ones, ones), level
                )
                assert paired.p_value == pytest.approx(want.pvalue, rel=1e-9, abs=1e-300)
                assert paired.ratio_ci is not None
                assert paired.ratio_ci.low == pytest.approx(math.exp(ci.low), rel=1e-12)
                assert paired.ratio_ci.high == pytest.approx(math.exp(ci.high), rel=1e-12)


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

    def pairs(spread: float, processes: bool = False) -> list[tuple[Timed, Timed]]:
        def timed(scale: float) -> Timed:
            values = tuple(float(v) for v in scale * rng.lognormal(0, spread, 10))
            return Timed((), values) if processes else Timed(values)

        return [(timed(r), timed(1.0)) for r in (0.5, 1.0, 2.0, 4.0)]

    true = math.exp(np.mean(np.log([0.5, 1.0, 2.0, 4.0])))
    for by_process in (False, True):  # repeats, or process medians: the same bootstrap
        quiet = geomean_ratio_ci(pairs(0.01, by_process))
        noisy = geomean_ratio_ci(pairs(0.2, by_process))
        assert quiet is not None and noisy is not None
        assert quiet.contains(true) and noisy.contains(true)
        assert quiet.high - quiet.low < (noisy.high - noisy.low) / 5
    assert geomean_ratio_ci([(Timed((1.0, 1.1)), Timed((1.0,)))]) is None  # one value


def test_a_configurations_change_is_welchs_t_over_its_models() -> None:
    """geomean_change_test: for one model, Welch's t on the log process medians, the
    same p and interval; over four models with no change, p < 0.05 in about 5% of 2000
    draws (the false-alarm rate it claims), and its interval holds a planted 1.1 change
    in about 95% of them."""
    a, b = (1.10, 1.12, 1.09), (1.00, 1.01, 0.99, 1.02)
    one = geomean_change_test([(Timed((), a), Timed((), b))])
    welch = welch_log_ratio(a, b, "")
    assert one.p_value == pytest.approx(welch.p_value)
    assert one.ratio_ci and welch.ratio_ci
    assert one.ratio_ci.low == pytest.approx(welch.ratio_ci.low)
    rng = np.random.default_rng(8)

    def draw(change: float) -> list[tuple[Timed, Timed]]:
        def timed(scale: float) -> Timed:
            return Timed((), tuple(float(v) for v in scale * rng.lognormal(0, 0.05, 3)))

        return [(timed(m * change), timed(m)) for m in (0.5, 1.0, 2.0, 4.0)]

    trials = 2000
    alarms = sum((geomean_change_test(draw(1.0)).p_value or 1) < 0.05 for _ in range(trials))
    assert 0.03 <= alarms / trials <= 0.07, alarms
    covered = 0
    for _ in range(trials):
        ci = geomean_change_test(draw(1.1)).ratio_ci
        covered += bool(ci and ci.contains(1.1))
    assert 0.93 <= covered / trials <= 0.97, covered
    # fewer than 2 values on a side: no test
    assert geomean_change_test([(Timed((1.0,)), Timed((1.0, 1.1)))]).p_value is None


def test_pairing_by_round_takes_the_hosts_drift_out_of_a_change() -> None:
    """Six rounds whose host speed drifts ±10% from round to round, each process 1%
    apart from its pair: a 5% slowdown is plain to the paired test and lost to Welch's
    over the same processes; with no change, the paired test's false alarms stay near
    5% of 2000 draws, and its interval holds the change in about 95% of them."""
    rng = np.random.default_rng(11)

    def draw(change: float, models: int = 1) -> list[tuple[Timed, Timed]]:
        drift = rng.lognormal(0, 0.10, 6)  # the host, round by round, for every job

        def side(scale: float) -> Timed:
            return Timed((), tuple(float(v) for v in scale * drift * rng.lognormal(0, 0.01, 6)))

        return [(side(change * m), side(m)) for m in (1.0, 3.0)[:models]]

    ((slow, base),) = draw(1.05)
    paired = paired_ratio_test(slow, base)
    assert paired.p_value is not None and paired.p_value < 0.01
    assert paired.ratio_ci and paired.ratio_ci.contains(1.05) and paired.ratio_ci.low > 1.02
    welch = compare_times(slow, base)
    assert welch.p_value is not None and welch.p_value > 0.05  # the drift swamps it
    trials = 2000
    alarms = sum((paired_ratio_test(*draw(1.0)[0]).p_value or 1) < 0.05 for _ in range(trials))
    assert 0.03 <= alarms / trials <= 0.07, alarms
    covered = sum(
        bool((ci := paired_geomean_test(draw(1.05, 2)).ratio_ci) and ci.contains(1.05))
        for _ in range(trials)
    )
    assert 0.93 <= covered / trials <= 0.97, covered
    # a side with one process has no round to pair
    assert paired_ratio_test(Timed((1.0,), ()), Timed((), (1.0, 1.1))).p_value is None


def _side(medians: list[float], references: list[float], quiet: list[bool]) -> Timed:
    return Timed(tuple(medians), tuple(medians), tuple(references), tuple(quiet))


def test_a_round_on_a_busy_host_or_at_another_speed_is_no_pair() -> None:
    """Eight rounds of a 5% slowdown, 0.5% apart, as this VM's paired sweeps record them,
    but in one round B's process ran on a busy host (3x slower) and A's on a quiet one,
    and in another the host ran 20% slower for A's process alone (its reference step
    too): the two rounds are left out and the rest call it (a round whose two processes
    both ran busy counts: what they share drops out of their ratio); with the same
    medians and no record of the host, the t over all eight cannot. A reference step
    that runs faster on one side every round (another torch build) is no change of
    speed: nothing is left out. More than a quarter of the rounds disturbed is a host
    unsettled throughout, and every round counts."""
    rng = np.random.default_rng(3)
    base = list(rng.lognormal(0, 0.005, 8))
    cand = [m * 1.05 for m in rng.lognormal(0, 0.005, 8)]
    cand[2] *= 3.0
    base[5] *= 1.2
    quiet = [True] * 8
    ref_b, ref_a = [1.0] * 8, [1.0] * 8
    ref_a[5] = 1.2
    blind = paired_ratio_test(Timed((), tuple(cand)), Timed((), tuple(base)))
    assert blind.p_value is not None and blind.p_value > ALPHA
    seen_sides = _side(cand, ref_b, [*quiet[:2], False, *quiet[3:]]), _side(base, ref_a, quiet)
    seen = paired_ratio_test(*seen_sides)
    assert seen.p_value is not None and seen.p_value < 0.001
    assert seen.ratio_ci and seen.ratio_ci.contains(1.05)
    assert "6 of 8 rounds (2 left out" in seen.method
    # the change it is on: the geometric mean of the counted rounds' ratios, the
    # interval's center (the pooled medians would carry the 3x round in with them)
    pairs = enumerate(zip(cand, base, strict=True))
    counted = [math.log(c / b) for i, (c, b) in pairs if i not in (2, 5)]
    assert seen.estimate == pytest.approx(math.exp(statistics.fmean(counted)))
    assert seen.estimate == pytest.approx(math.sqrt(seen.ratio_ci.low * seen.ratio_ci.high))
    # a paired sweep's look judges that change too, not the ratio of the pooled repeats
    from benchflow.report.compare import REGRESSION, judge_paired

    flat = [Timed((1.0,) * 8, *dataclasses.astuple(t)[1:]) for t in seen_sides]
    assert judge_paired(*flat, 0.02, 8) == REGRESSION
    # a load both processes of a round share is no reason to leave the round out
    both_busy = [True, False, *quiet[2:]]
    shared = paired_ratio_test(
        _side(cand, ref_b, [True, False, False, *quiet[3:]]), _side(base, ref_b, both_busy)
    )
    assert "7 of 8 rounds (1 left out" in shared.method  # round 2 (B busy, A not); not 1
    # a host that treated 3 of the 8 unevenly was unsettled throughout: every round counts
    uneven = paired_ratio_test(
        _side(cand, ref_b, [True, False, False, *quiet[3:]]), _side(base, ref_a, quiet)
    )
    assert "of 8" not in uneven.method and "left out" not in uneven.method
    faster_torch = paired_ratio_test(_side(cand, [0.7] * 8, quiet), _side(base, ref_b, quiet))
    assert "of 8" not in faster_torch.method  # every round counts (and so fails to call it)
    assert faster_torch.p_value is not None and faster_torch.p_value > ALPHA
    # at a paired sweep's look, the same rule over the look's rounds
    look = paired_ratio_test(
        _side(cand[:5], ref_b[:5], [True, True, False, True, True]),
        _side(base[:5], ref_a[:5], quiet[:5]),
        budget=8,
    )
    assert "4 of 5 rounds (1 left out" in look.method and "look 2 of 3" in look.method
    # a row without the facts (recorded before they were kept): every round counts
    old = Timed.of([1.0], [{"median_s": 1.0, "host_reference_s": 1.0}, {"median_s": 1.1}])
    assert old.process_medians == (1.0, 1.1) and old.process_references == ()


def test_leaving_disturbed_rounds_out_keeps_a_a_at_the_level() -> None:
    """2000 A/A pairs of 8 rounds (N(0, 3%) a round), each process disturbed one time in
    ten (1.1-3x slower; its host found busy, or its reference step as slow): the rounds
    left out are chosen by the host's record, not by the ratios, so the paired test over
    the rest still alarms about 5% of the time."""
    rng = np.random.default_rng(17)

    def side() -> Timed:
        medians = rng.lognormal(0, 0.03 / math.sqrt(2), 8)
        hit = rng.random(8) < 0.1
        slow = np.where(hit, rng.uniform(1.1, 3.0, 8), 1.0)
        busy = hit & (rng.random(8) < 0.5)
        refs = np.where(hit & ~busy, slow, 1.0) * rng.lognormal(0, 0.01, 8)
        return _side(list(medians * slow), list(refs), list(~busy))

    trials = 2000
    alarms = sum((paired_ratio_test(side(), side()).p_value or 1) < ALPHA for _ in range(trials))
    assert 0.03 <= alarms / trials <= 0.07, alarms


def test_a_paired_sweeps_looks_spend_the_false_alarm_level_once() -> None:
    """O'Brien-Fleming-type spending (Lan and DeMets) over a paired sweep's looks: each
    look's share is a(t) less the earlier looks', worked here from scipy's normal; the
    shares add up to 5% whatever the budget, the first the smallest."""
    from scipy.stats import norm

    z = norm.ppf(1 - ALPHA / 2)

    def spent(t: float) -> float:
        return float(2 - 2 * norm.cdf(z / math.sqrt(t)))

    assert looks(3) == (3,) and looks(4) == (3, 4) and looks(8) == (3, 5, 8)
    assert looks(12) == (3, 5, 8, 12) and looks(13) == (3, 5, 8, 12, 13)
    shares = [look_alpha(r, 8) for r in looks(8)]
    assert shares == pytest.approx(
        [spent(3 / 8), spent(5 / 8) - spent(3 / 8), ALPHA - spent(5 / 8)]
    )
    assert shares[0] < shares[1] < shares[2]
    for budget in range(3, 21):
        assert sum(look_alpha(r, budget) for r in looks(budget)) == pytest.approx(ALPHA)
    assert look_alpha(7, 8) == look_alpha(5, 8)  # between looks: the last look's


def test_stopping_at_the_looks_keeps_false_alarms_within_the_level() -> None:
    """800 paired A/A sweeps of up to 8 rounds (each round's log ratio drawn from
    N(0, 3%)), judged after rounds 3, 5 and 8 as a paired sweep judges a pair
    (report/compare.judge_paired; threshold 0: any significant change is an alarm) and
    stopped at the first verdict: at most 5% alarm. The same looks each at 5%, as if
    every look were the only one, alarm more often: the spending is what holds it. A
    10% slowdown is called in most sweeps, most of them before the budget."""
    from benchflow.report.compare import INSUFFICIENT, NO_CHANGE, REGRESSION, judge_paired

    rng = np.random.default_rng(5)

    def sweep(change: float) -> tuple[str, int, bool]:
        logs = rng.normal(math.log(change), 0.03, 8)
        naive = False
        for at in looks(8):
            medians = np.exp(logs[:at])
            cand, base = Timed(tuple(medians), tuple(medians)), Timed((1.0,) * at, (1.0,) * at)
            naive |= (paired_ratio_test(cand, base).p_value or 1) < ALPHA
            verdict = judge_paired(cand, base, 0.0, 8)
            if verdict != INSUFFICIENT or at == 8:
                return verdict, at, naive
        raise AssertionError("the budget is a look")

    trials = 800
    a_a = [sweep(1.0) for _ in range(trials)]
    alarms = sum(v not in (INSUFFICIENT, NO_CHANGE) for v, _, _ in a_a)
    assert alarms / trials <= ALPHA + 0.01, alarms
    assert sum(naive for _, _, naive in a_a) / trials > ALPHA + 0.02  # unspent looks
    # taken over a family of pairs, a p-value that decides one pair alone may not:
    # never the other way (the report's BH step then agrees with the sweep)
    alone = together = 0
    for _ in range(200):
        medians = np.exp(rng.normal(math.log(1.04), 0.03, 5))
        cand, base = Timed(tuple(medians), tuple(medians)), Timed((1.0,) * 5, (1.0,) * 5)
        one, four = judge_paired(cand, base, 0.0, 8), judge_paired(cand, base, 0.0, 8, 4)
        alone += one == REGRESSION
        together += four == REGRESSION
        assert four != REGRESSION or one == REGRESSION
    assert together < alone
    slow = [sweep(1.10) for _ in range(150)]
    assert sum(v == REGRESSION for v, _, _ in slow) / 150 > 0.9
    assert sum(v == REGRESSION and at < 8 for v, at, _ in slow) / 150 > 0.5


def test_a_pair_no_look_could_decide_stops_early_and_costs_no_detection() -> None:
    """out_of_reach, the paired sweep's futility rule, at a 2% threshold: a pair whose
    change is within the band and whose rounds spread too wide for the budget's
    interval to fit in it stops; one whose spread could fit, or whose change lies past
    the band, or that reached the budget, does not. Over 600 simulated sweeps of up to 8
    rounds (each round's log ratio N(log change, 3%)): A/A pairs stop at least 1.5
    rounds sooner on average with it (4.2 rounds against 8.0), never alarm more, and a
    5% change is called a regression at least 98% as often as without it (479 and 485
    of 600)."""
    from benchflow.report.compare import INSUFFICIENT, REGRESSION, judge_paired

    def pair(ratios: list[float]) -> tuple[Timed, Timed]:
        ones = (1.0,) * len(ratios)
        return Timed(tuple(ratios), tuple(ratios)), Timed(ones, ones)

    wide, tight, past = [1.03, 0.97, 1.01], [1.004, 0.998, 1.001], [1.05, 1.09, 1.02]
    why = out_of_reach(*pair(wide), 3, 8, 0.02)
    assert why.startswith("+0.3% lies within ±2%") and "after 8 rounds" in why
    assert out_of_reach(*pair(tight), 3, 8, 0.02) == ""  # "within ±2%" is in reach
    assert out_of_reach(*pair(past), 3, 8, 0.02) == ""  # past the band: may yet be called
    assert out_of_reach(*pair(wide + wide + wide[:2]), 8, 8, 0.02) == ""  # the budget's
    assert out_of_reach(*pair(wide[:2]), 2, 8, 0.02) == ""  # before the first look

    rng = np.random.default_rng(11)

    def sweep(logs: np.ndarray, futility: bool) -> tuple[str, int]:
        for at in looks(8):
            cand, base = pair(list(np.exp(logs[:at])))
            verdict = judge_paired(cand, base, 0.02, 8, 4)
            if verdict != INSUFFICIENT or at == 8:
                return verdict, at
            if futility and out_of_reach(cand, base, at, 8, 0.02):
                return INSUFFICIENT, at
        raise AssertionError("the budget is a look")

    for change in (1.0, 1.05):
        draws = [rng.normal(math.log(change), 0.03, 8) for _ in range(600)]
        without, with_it = ([sweep(d, f) for d in draws] for f in (False, True))
        called = [sum(v == REGRESSION for v, _ in s) for s in (without, with_it)]
        rounds = [np.mean([at for _, at in s]) for s in (without, with_it)]
        assert called[1] >= 0.98 * called[0], called
        if change == 1.0:
            assert called[1] <= called[0] and rounds[1] < rounds[0] - 1.5, (called, rounds)
        same = zip(without, with_it, strict=True)
        assert all(v == va or va == INSUFFICIENT for (v, _), (va, _) in same)


def test_a_paired_round_compares_the_processes_fastest_repeats() -> None:
    """Eight rounds of a 5% slowdown, three repeats a process, pooled as a sweep pools
    them (results/pooled.process_summary): in three rounds the host slowed two of one
    side's three repeats by 10-15% (the VM's intermittent load). Each process's fastest
    repeat is left alone, so the paired test calls the change and its interval holds
    1.05; the medians, which moved with the two repeats, give an interval three times as
    wide, off-center (a row recorded before processes kept their fastest repeat is
    paired on its medians)."""
    rng = np.random.default_rng(5)
    speeds = rng.lognormal(0, 0.004, 8)  # each round's process speed, common to its three

    def side(scale: float, disturbed: dict[int, float]) -> Timed:
        processes, repeats = [], []
        for i, speed in enumerate(speeds):
            times = [scale * speed * (1 + e) for e in rng.uniform(0, 0.002, 3)]
            if i in disturbed:
                times[:2] = [t * disturbed[i] for t in times[:2]]
            repeats += times
            result = _process_result(times, first=1.0, own=0.0)
            processes.append(process_summary(result))
        return Timed.of(repeats, processes)

    cand, base = side(1.05, {1: 1.15, 6: 1.1}), side(1.0, {3: 1.12})
    assert cand.process_fastest and len(cand.process_fastest) == len(cand.process_medians) == 8
    fastest = paired_ratio_test(cand, base)
    assert fastest.p_value is not None and fastest.p_value < 0.001
    assert fastest.ratio_ci is not None and fastest.ratio_ci.contains(1.05)
    on_medians = [dataclasses.replace(t, process_fastest=()) for t in (cand, base)]
    medians = paired_ratio_test(*on_medians)
    assert medians.p_value is not None and medians.p_value > 20 * fastest.p_value
    assert medians.estimate is not None and abs(medians.estimate / 1.05 - 1) > 0.01

    def width(ci: Interval | None) -> float:
        assert ci is not None
        return ci.high - ci.low

    assert width(medians.ratio_ci) > 3 * width(fastest.ratio_ci)


def test_a_process_interval_is_t_on_the_logs_and_covers_the_typical_process() -> None:
    """Three process medians, lognormal (the geometric mean is the median there): the
    t interval over their logs holds the true median in 95% of 2000 draws (within
    Monte Carlo error), whatever the spread; it is wider the more they differ."""
    rng = np.random.default_rng(21)
    for spread in (0.02, 0.2):
        hits = 0
        for _ in range(2000):
            ci = log_t_interval(list(rng.lognormal(math.log(0.03), spread, DEFAULT_PROCESSES)))
            assert ci is not None
            hits += ci.contains(0.03)
        assert 0.935 <= hits / 2000 <= 0.965, (spread, hits)
    tight, loose = log_t_interval([1.0, 1.01, 0.99]), log_t_interval([1.0, 1.3, 0.8])
    assert tight is not None and loose is not None
    assert loose.high - loose.low > 10 * (tight.high - tight.low)
    assert tight.contains(math.exp(np.mean(np.log([1.0, 1.01, 0.99]))))
    assert log_t_interval([1.0]) is None and log_t_interval([1.0, -1.0]) is None
    same = log_t_interval([2.0, 2.0])  # no spread: the interval is the value
    assert same is not None and (same.low, same.high) == (2.0, 2.0)


def test_a_time_is_judged_by_its_processes_when_it_has_several() -> None:
    """Processes' repeats move together: 3 processes of tight repeats at 1.0, 1.1 and
    1.2 ms. The repeats alone give a narrow interval that misses two processes; the
    processes' interval holds all three medians. One process: its repeats'."""
    repeats = [m * (1 + d) for m in (1.0, 1.1, 1.2) for d in (-0.001, 0.0, 0.001) * 4]
    by_repeat = time_interval(Timed(tuple(repeats)))
    by_process = time_interval(Timed(tuple(repeats), (1.0, 1.1, 1.2)))
    assert by_repeat is not None and by_process is not None
    assert by_repeat == median_ci(repeats)
    assert by_process.low < 1.0 and by_process.high > 1.2
    assert not (by_repeat.contains(1.0) and by_repeat.contains(1.2))
    assert Timed(tuple(repeats), (1.0,)).by_process is False  # one process: repeats


def test_comparing_by_processes_keeps_a_a_quiet_and_finds_a_slowdown() -> None:
    """Welch's t on log process medians, 3 against 3: over 2000 A/A pairs about 5% come
    out below p = 0.05 (as a test at that level must), a 30% slowdown in 3% noise is
    found nearly always, and the ratio's interval holds the true ratio 95% of the time.
    Where a side has one process, its repeats are compared (Mann-Whitney U)."""
    rng = np.random.default_rng(22)

    def job(scale: float, spread: float) -> Timed:
        return Timed((), tuple(float(v) for v in scale * rng.lognormal(0, spread, 3)))

    aa = [compare_times(job(1.0, 0.1), job(1.0, 0.1)) for _ in range(2000)]
    false_alarms = sum((t.p_value or 1) < ALPHA for t in aa) / len(aa)
    assert 0.03 <= false_alarms <= 0.07
    covered = sum(t.ratio_ci is not None and t.ratio_ci.contains(1.0) for t in aa) / len(aa)
    assert 0.93 <= covered <= 0.97
    ab = [compare_times(job(1.3, 0.03), job(1.0, 0.03)) for _ in range(200)]
    assert sum((t.p_value or 1) < ALPHA for t in ab) >= 190
    assert all(t.can_reach and t.method.startswith("Welch's t") for t in ab)
    one = compare_times(Timed((1.0, 1.1, 1.2)), Timed((1.0, 1.1, 1.2), (1.0, 1.2)))
    assert one.method.startswith("Mann-Whitney U") and not one.can_reach  # 3 against 3


def test_jobs_take_three_processes_where_their_repeats_adapt() -> None:
    assert BenchConfig().process_count == DEFAULT_PROCESSES == 3
    assert BenchConfig(repeat=3).process_count == 1  # a count given: one process, as before
    assert BenchConfig(repeat=3, processes=2).process_count == 2
    assert BenchConfig(processes=1).process_count == 1


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


def test_a_repeat_is_not_contended_by_what_a_tick_of_proc_stat_can_miscount() -> None:
    """/proc/stat counts each core's busy and steal time in ticks (TICK_S), each core's
    count over a repeat a tick off at most: a 12-ms repeat (a 1-ms step, 10 a repeat) on 2
    cores that counts one tick more on each is not contended; past that it is, and a
    50-ms repeat's steal the same."""
    cores = 2
    short = _windows(20, own=cores * TICK_S)
    short["total_time_s"] = [0.012] * 20
    assert cores * TICK_S > OTHER_OWN_LIMIT * 0.012 * cores  # the share alone would flag it
    load = host_load(short, cores)
    assert load is not None and load.quiet and load.contended == []
    short["host_other_cpu_own_s"] = [1.5 * cores * TICK_S] * 20
    load = host_load(short, cores)
    assert load is not None and not load.quiet and len(load.contended) == 20
    stolen = _windows(20, own=0.0, steal=cores * TICK_S)
    stolen["total_time_s"] = [0.05] * 20
    load = host_load(stolen, cores)
    assert load is not None and load.contended == []
    stolen["host_steal_s"] = [1.5 * cores * TICK_S] * 20
    load = host_load(stolen, cores)
    assert load is not None and len(load.contended) == 20


def test_the_host_ran_at_another_speed_when_its_reference_step_moved_past_the_limit() -> None:
    assert speed_change(1.0, 1.25) == pytest.approx(0.25)  # the candidate's host slower
    assert speed_change(1.0, 0.8) == pytest.approx(-0.2)
    assert speed_change(1.0, 1 + SPEED_LIMIT / 2) is None  # within the limit: the same
    assert speed_change(None, 1.0) is None and speed_change(1.0, None) is None


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
    # the time's interval is the processes': t over their medians' logs, not the repeats'
    ci = log_t_interval([statistics.median(a.metrics["per_iter_time_s"]), 2.1])
    assert ci is not None and pooled.timing.ci_rel == pytest.approx(ci.rel_half_width(1.2))
    summary = pooled.summary["per_iter_time_s"]
    assert (summary["ci_low"], summary["ci_high"]) == pytest.approx((ci.low, ci.high))


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


def _process_medians() -> dict[str, list[float]]:
    """Each process's median, in time order, of jobs timed in many processes one after
    another, each process as a default job's (tests/data; benchmarks/RESULTS.md)."""
    data = json.loads((DATA / "process_series.json").read_text())
    return {name: list(map(float, v)) for name, v in data["medians"].items()}


def test_the_process_interval_covers_the_long_run_median_of_real_process_medians() -> None:
    """Recorded process medians (heavy-tailed, two speeds of the host: real ones) in a
    random order, so that each window of 3, what a default job times, is a fair draw
    of the job's processes over the whole recording: its t interval holds the median of
    all of that job's process medians in at least 90% of at least 50 windows. (In time
    order, back to back, it does not: the host keeps one speed for a minute at a time,
    longer than a job's processes take when they run one after another; interleaved
    rounds spread them, the test below; docs/timing.md.)"""
    rng = np.random.default_rng(12)
    shuffled = {name: list(rng.permutation(v)) for name, v in _process_medians().items()}
    hits, trials = _windows_covered(shuffled)
    assert trials >= 50
    assert hits / trials >= 0.90, f"{hits} of {trials}"


def _windows_covered(medians: dict[str, list[float]]) -> tuple[int, int]:
    """(windows whose t interval holds their job's median of all its process medians,
    windows): each job's process medians cut, in the order given, into windows of a
    default job's processes."""
    trials = hits = 0
    for values in medians.values():
        long_run = statistics.median(values)
        for start in range(0, len(values) - DEFAULT_PROCESSES + 1, DEFAULT_PROCESSES):
            ci = log_t_interval(values[start : start + DEFAULT_PROCESSES])
            assert ci is not None
            trials, hits = trials + 1, hits + ci.contains(long_run)
    return hits, trials


def test_the_interval_over_interleaved_processes_covers_the_long_run_median() -> None:
    """Recorded process medians of the built-in grid's jobs timed in 15 interleaved
    rounds (sweep/rounds.py: one process of every job a round, each process as a default
    job's), cut in round order, with no shuffling, into windows of 3: what a default
    sweep of the grid times, its processes a round apart. The window's t interval holds
    the median of all of that job's process medians in at least 90% of at least 50."""
    data = json.loads((DATA / "round_series.json").read_text())
    hits, trials = _windows_covered(data["medians"])
    assert trials >= 50
    assert hits / trials >= 0.90, f"{hits} of {trials}"
