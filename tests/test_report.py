"""The report: HUD-style summaries, output files, MLflow sources and logging, and the
regression gate, on hand-made rows and on real sweeps (a planted 10x slowdown)."""

from __future__ import annotations

import csv
import io
import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tests.conftest import SEARCHPATH, CliResult, EarlySweeps, early, run_cli

from benchflow.core.status import Status
from benchflow.report.compare import compare, overall
from benchflow.report.csv_tables import entries_csv, summary_csv
from benchflow.report.model import Report, build_report
from benchflow.report.render import (
    ENTRY_HEADER,
    SUMMARY_HEADER,
    to_html,
    to_markdown,
)
from benchflow.report.sources import load
from benchflow.results.headline import headline_metrics
from benchflow.results.intervals import mann_whitney
from benchflow.results.row import ResultRow


def row(
    model: str,
    backend: str,
    times: list[float] | None,
    *,
    status: str = "ok",
    code: str = "PASS",
    first: float | None = None,
    rss: float = 1000.0,
    overrides: tuple[str, ...] = (),
    ts: float = 0.0,
    config: dict[str, Any] | None = None,
) -> ResultRow:
    dynamo = {"eager": None, "lazy_xla": None, "dynamo_eager": "eager"}.get(backend, backend)
    metrics: dict[str, Any] = {"peak_host_rss_bytes": rss}
    summary = {}
    if times:
        metrics["per_iter_time_s"] = times
        metrics["first_iter_time_s"] = first if first is not None else 10 * max(times)
        summary = {"per_iter_time_s": {"median": sorted(times)[len(times) // 2], "iqr": 0.0}}
    return ResultRow.from_dict(
        {
            "model": {"model_name": model},
            "experiment": {
                "dynamo": dynamo,
                "xla": "PJRT" if backend in ("openxla", "lazy_xla") else None,
                "test": "eval",
            },
            "status": status,
            "error": None if status == "ok" else "RuntimeError: boom\ntraceback",
            "metrics": metrics,
            "summary": summary,
            "verification_code": code,
            "timestamp": ts,
            "job": {"overrides": [f"model={model}", f"dynamo={backend}", *overrides]},
            **({"config": config} if config is not None else {}),
        }
    )


ROWS = [
    row("a", "inductor", [0.010, 0.011, 0.012], first=1.011, rss=2000),
    row("a", "openxla", [0.005, 0.0055, 0.006], first=0.5055, rss=1000),
    row("b", "inductor", [0.002, 0.002, 0.002], rss=1000),
    row("b", "openxla", [0.008, 0.008, 0.008], rss=1000),
    row("c", "inductor", [0.004] * 3),
    row("c", "openxla", None, status="crashed", code="VERIFIER_DIDNT_RUN"),
    row("d", "inductor", [0.001] * 3),
    row("d", "openxla", [0.001] * 3, code="FAIL"),
    row("e", "openxla", [0.003] * 3),  # no baseline row
    row("f", "inductor", None, status="skipped", code="VERIFIER_SKIPPED"),
    row("f", "openxla", None, status="skipped", code="VERIFIER_SKIPPED"),
]


def test_hud_summary_definitions() -> None:
    rep = build_report(ROWS, baseline="inductor")
    by = {(e.model, e.config.label): e for e in rep.entries}
    assert by[("a", "openxla")].speedup == pytest.approx(0.011 / 0.0055)
    assert by[("b", "openxla")].speedup == pytest.approx(0.25)
    # compile time: the first call's excess over a steady step
    assert by[("a", "openxla")].compile_s == pytest.approx(0.5)
    assert by[("a", "openxla")].memory_ratio == pytest.approx(2.0)
    # one-sided, failed and inaccurate models say why they have no speedup
    assert by[("c", "openxla")].note == "crashed: not in the geomean"
    assert by[("d", "openxla")].note == "accuracy FAIL: not in the geomean"
    assert by[("e", "openxla")].note == "no inductor row: no speedup"
    s = {x.config.label: x for x in rep.summaries}
    ox = s["openxla"]
    # a, b, e passed; c crashed, d failed accuracy; f skipped (not counted)
    assert (ox.passed, ox.models, ox.skipped) == (3, 5, 1)
    assert ox.passrate == pytest.approx(0.6)
    assert ox.geomean_speedup == pytest.approx(math.sqrt((0.011 / 0.0055) * 0.25))
    assert ox.speedup_models == 2
    assert ox.mean_compile_s == pytest.approx((0.5 + (0.08 - 0.008) + (0.03 - 0.003)) / 3, rel=1e-6)
    assert ox.memory_ratio == pytest.approx((2.0 + 1.0) / 2)
    ind = s["inductor"]
    assert (ind.passed, ind.models, ind.geomean_speedup) == (4, 4, 1.0)


def test_swept_axes_label_configs_and_pick_their_baseline() -> None:
    rows = [
        row("a", "inductor", [0.01] * 3, overrides=("dtype=float32", "repeat=3")),
        row("a", "openxla", [0.02] * 3, overrides=("dtype=float32", "repeat=3")),
        row("a", "inductor", [0.004] * 3, overrides=("dtype=bfloat16", "repeat=3")),
        row("a", "openxla", [0.001] * 3, overrides=("dtype=bfloat16", "repeat=3")),
    ]
    rep = build_report(rows, "inductor")
    assert rep.axes == ["dtype"]  # repeat=3 is common to every row: not a label
    speed = {e.config.label: e.speedup for e in rep.entries}
    assert speed["openxla dtype=float32"] == pytest.approx(0.5)
    assert speed["openxla dtype=bfloat16"] == pytest.approx(4.0)


def test_a_setting_a_row_leaves_out_while_unset_is_labelled_with_its_value() -> None:
    """A row's config leaves host_allocator out at its default: beside a glibc row, the
    default's label says steady (and the pair's A its value), not "-"."""
    config = {"model.name": "a", "dynamo.name": "inductor", "dtype": "float32"}
    rows = [
        row("a", "inductor", [0.010] * 3, config=config),
        row("a", "inductor", [0.012] * 3, config=config | {"host_allocator": "glibc"}),
    ]
    rep = build_report(rows, "inductor")
    assert rep.axes == ["host_allocator"]
    labels = [e.config.label for e in rep.entries]
    assert labels == ["inductor host_allocator=steady", "inductor host_allocator=glibc"]


def test_the_report_labels_the_timed_step_and_keeps_steps_apart() -> None:
    def step_row(backend: str, t: float, step: str) -> ResultRow:
        data = row("a", backend, [t] * 3).to_dict()
        data["schema_version"] = 3
        data["experiment"]["step"] = step
        data["config"] = {"model.step": step}
        return ResultRow.from_dict(data)

    rep = build_report([step_row("inductor", 0.01, "module"), step_row("openxla", 0.005, "module")])
    assert rep.steps == ["module"] and rep.axes == []
    md = to_markdown(rep, "t")
    assert "timed step: model.step=module: get_module()'s module on its example inputs" in md
    # An old row (schema 2: the model's own step) never shares a column with a new one.
    mixed = build_report([step_row("inductor", 0.01, "module"), row("a", "inductor", [0.02] * 3)])
    assert mixed.steps == ["module", "torchbench"] and mixed.axes == ["model.step"]
    assert [e.config.label for e in mixed.entries] == [
        "inductor model.step=module",
        "inductor model.step=torchbench",
    ]


def test_plain_eager_and_dynamo_eager_stay_apart() -> None:
    rows = [row("a", "eager", [0.02] * 3), row("a", "dynamo_eager", [0.01] * 3)]
    rep = build_report(rows, "none")
    assert [(e.config.label, e.speedup) for e in rep.entries] == [
        ("eager", None),
        ("dynamo_eager", 2.0),
    ]


def test_a_later_row_replaces_an_earlier_one() -> None:
    rows = [row("a", "eager", [0.5] * 3, ts=1), row("a", "eager", [0.1] * 3, ts=2)]
    rep = build_report(rows, "none")
    (entry,) = rep.entries
    assert entry.time_s == 0.1 and "replaced" in rep.notes[0]


def _spread(median: float, n: int, rel: float, seed: int) -> list[float]:
    """n repeat times around `median`, spread by ±rel (uniform, seeded)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    return [float(median * (1 + rel * u)) for u in rng.uniform(-1, 1, n)]


def _busy(r: ResultRow) -> ResultRow:
    """The row as if timed while other processes used its cores (results/load.py)."""
    data = r.to_dict()
    data["timing"] = {"host": {"quiet": False, "contended": [0, 1, 2], "other_own_share": 0.4}}
    return ResultRow.from_dict(data)


def test_each_verdict_from_samples_effect_and_host() -> None:
    """Each verdict of report --compare (docs/reports.md), from raw samples: significance
    (Mann-Whitney U, BH-adjusted) and the minimum effect (--threshold) together."""
    base = build_report(
        [
            row("same", "eager", _spread(0.010, 12, 0.02, 1)),
            row("slow", "eager", _spread(0.010, 12, 0.02, 2)),
            row("fast", "eager", _spread(0.010, 12, 0.02, 3)),
            row("small", "eager", _spread(0.010, 40, 0.01, 4)),
            row("few", "eager", _spread(0.010, 3, 0.01, 5)),
            row("wide", "eager", _spread(0.010, 12, 0.40, 6)),
            row("busy", "eager", _spread(0.010, 12, 0.02, 7)),
            row("breaks", "eager", [0.01] * 3),
            row("fixed", "eager", [0.01] * 3, code="FAIL"),
            row("gone", "eager", [0.01] * 3),
        ],
        "none",
    )
    cand = build_report(
        [
            row("same", "eager", _spread(0.010, 12, 0.02, 11)),
            row("slow", "eager", _spread(0.013, 12, 0.02, 12)),  # +30%
            row("fast", "eager", _spread(0.005, 12, 0.02, 13)),  # -50%
            row("small", "eager", _spread(0.0102, 40, 0.01, 14)),  # +2%: real, below 5%
            row("few", "eager", _spread(0.013, 3, 0.01, 15)),  # +30%, 3 against 3
            row("wide", "eager", _spread(0.0105, 12, 0.40, 16)),  # +5% in ±40% noise
            _busy(row("busy", "eager", _spread(0.013, 12, 0.02, 17))),  # +30%, host busy
            row("breaks", "eager", [0.01] * 3, code="FAIL"),
            row("fixed", "eager", [0.01] * 3),
            row("new", "eager", [0.01] * 3),
        ],
        "none",
    )
    changes = {c.model: c for c in compare(base, cand, threshold=0.05)}
    assert {m: c.verdict for m, c in changes.items()} == {
        "same": "no significant change",
        "slow": "regression",
        "fast": "improvement",
        "small": "no significant change",
        "few": "insufficient data",
        "wide": "insufficient data",
        "busy": "suspicious",
        "breaks": "broken",
        "fixed": "fixed",
        "gone": "missing",
        "new": "new",
    }
    assert {m for m, c in changes.items() if c.fails} == {"slow", "breaks"}
    # what each says: the 3-against-3 floor, the interval too wide, the busy side
    assert "can never reach p < 0.05" in changes["few"].detail
    assert "wider than ±5%" in changes["wide"].detail
    assert "candidate ran on a busy host" in changes["busy"].detail
    # the small change is significant, but its interval lies within the threshold
    small = changes["small"]
    assert small.q_value is not None and small.q_value < 0.05
    assert small.ratio_ci is not None and 1 < small.ratio_ci.low < small.ratio_ci.high < 1.05
    slow = changes["slow"]
    assert slow.ratio_ci is not None and slow.ratio_ci.contains(slow.ratio or 0)
    assert slow.ratio_ci.low > 1.2
    # the threshold is respected: +30% is no regression at 50%
    loose = {c.model: c.verdict for c in compare(base, cand, threshold=0.5)}
    assert loose["slow"] == "no significant change" and loose["fast"] == "improvement"
    assert not any(c.fails for c in compare(base, base, threshold=0.0))
    # the geomean change over the models both sides timed (not breaks, fixed, gone, new)
    (eager,) = overall(list(changes.values()))
    timed = [c.ratio for m, c in changes.items() if m in TIMED and c.ratio]
    assert eager.models == len(TIMED) == len(timed)
    assert eager.geomean_ratio == pytest.approx(math.prod(timed) ** (1 / len(timed)))
    assert eager.ci is not None and eager.ci.contains(eager.geomean_ratio)
    # judged as a row is: here no significant change, and too wide to call none
    assert eager.verdict == "insufficient data" and not eager.fails, eager.detail
    line = f"eager: insufficient data, geomean change {eager.geomean_ratio - 1:+.1%} (95% CI"
    assert line in to_markdown(cand, "t", list(changes.values()))


def _config_sweep(scale: float, spread: float, seed: int, models: int = 6) -> Report:
    """`models` rows of one configuration, each timed in 3 processes whose medians
    spread lognormally by `spread`, every model `scale` times slower."""
    rng = np.random.default_rng(seed)
    return build_report(
        [
            _processes(
                f"m{i}", [float(0.01 * (i + 1) * scale * v) for v in rng.lognormal(0, spread, 3)]
            )
            for i in range(models)
        ],
        "none",
    )


def test_a_configuration_is_judged_on_its_geomean_as_a_row_is() -> None:
    """Six models each 10% slower, each in 3 processes spread ±5%: 3 against 3 cannot
    call one model changed, but the configuration's geomean over six is a regression
    past the threshold; the same sweeps with no change are no regression, and the gate
    fails on the configuration alone."""
    from benchflow.cli.report import _verdict

    base = _config_sweep(1.0, 0.05, seed=100)
    slower = compare(base, _config_sweep(1.10, 0.05, seed=200), threshold=0.05)
    assert not any(c.fails for c in slower)  # no row on its own
    (config,) = overall(slower)
    assert config.verdict == "regression" and config.fails, config.detail
    assert config.ci is not None and config.ci.low > 1.0 and config.ci.contains(1.1)
    assert config.q_value is not None and config.q_value < 0.05
    assert _verdict(slower, "base", [], 0.05) == 1
    same = compare(base, _config_sweep(1.0, 0.05, seed=300), threshold=0.05)
    (config,) = overall(same)
    assert config.verdict in ("no significant change", "insufficient data"), config.detail
    assert _verdict(same, "base", [], 0.05) == 0
    # the threshold holds for configurations too: 10% is no regression at 20%
    (loose,) = overall(compare(base, _config_sweep(1.10, 0.05, seed=200), threshold=0.2))
    assert loose.verdict == "no significant change", loose.detail


TIMED = ("same", "slow", "fast", "small", "few", "wide", "busy")


def _processes(
    model: str, medians: list[float], overrides: tuple[str, ...] = (), num: int = 0
) -> ResultRow:
    """A row timed in len(medians) processes of 8 tight repeats each."""
    times = [m * (1 + d) for m in medians for d in (-0.002, -0.001, 0.0, 0.001) * 2]
    data = row(model, "eager", times, overrides=overrides).to_dict()
    data["timing"] = {"processes": [{"repeats": 8, "median_s": m} for m in medians]}
    data["job"]["num"] = num
    return ResultRow.from_dict(data)


def _ab_sweep(change: float, seed: int) -> list[ResultRow]:
    """One sweep of `slowdown=null,0.05` over three models, six rounds whose host speed
    drifts ±10% from round to round (both variants alike), each process 1% from its
    pair; the second variant `change` times slower."""
    rng = np.random.default_rng(seed)
    rows = []
    for i, model in enumerate(("m1", "m2", "m3")):
        drift = rng.lognormal(0, 0.10, 6) * 0.01 * (i + 1)
        variants: tuple[tuple[tuple[str, ...], float], ...] = (
            ((), 1.0),
            (("slowdown=0.05",), change),
        )
        for j, (extra, scale) in enumerate(variants):
            medians = [float(v) for v in scale * drift * rng.lognormal(0, 0.01, 6)]
            rows.append(_processes(model, medians, extra, num=2 * i + j))
    return rows


@pytest.mark.full  # 8 jobs of 6 processes, small models: ~75 s on 2 CPUs
def test_a_planted_slowdown_in_one_sweep_is_judged_by_pairs(tmp_path: Path) -> None:
    grid = ["-m", "model=resnet,llama", "model.size=small", "dynamo=none,inductor"]
    res = run_cli([*grid, "slowdown=null,0.05", "processes=6", "mlflow.enabled=false"], tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    (sweep,) = res.sweep_dirs
    judged = run_cli(["report", str(sweep), "--pair", "slowdown", "--no-mlflow"], tmp_path)
    assert judged.returncode in (0, 1), judged.stderr[-3000:]
    table = list(csv.DictReader((sweep / "pair" / "compare.csv").open()))
    assert len(table) == 4 and all(c["method"] == "paired t over 6 rounds" for c in table)
    # never called faster: the planted slowdown is all that differs
    assert not any(c["verdict"] == "improvement" for c in table), table


@pytest.mark.full  # 8 jobs of at most 8 processes, small models: ~80 s on 2 CPUs
def test_a_paired_sweep_of_the_grid_closes_pairs_at_looks(tmp_path: Path) -> None:
    """docs/reports.md's paired sweep as written: every row ran to a look (3, 5 or its
    budget, 8) and records the sweep's budget and threshold, which report --pair reads."""
    grid = ["-m", "model=resnet,llama", "model.size=small", "dynamo=none,inductor"]
    paired = ["slowdown=null,0.05", "pair=slowdown", "pair_threshold=0.02"]
    res = run_cli([*grid, *paired, "mlflow.enabled=false"], tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    (sweep,) = res.sweep_dirs
    rows = res.rows()
    assert len(rows) == 8 and all(r["status"] == "ok" for r in rows)
    assert {len(r["timing"]["processes"]) for r in rows} <= {3, 5, 8}
    by_num = {r["job"]["num"]: r for r in rows}
    for a in range(0, 8, 2):  # (A, B) of each pair run one loop: A's calibrated steps
        steps = (
            by_num[a]["timing"]["iterations_per_run"],
            by_num[a + 1]["timing"]["iterations_per_run"],
        )
        assert steps[0] == steps[1], steps
    assert all(
        r["job"]["paired"] == {"axis": "slowdown", "rounds": 8, "threshold": 0.02} for r in rows
    )
    judged = run_cli(["report", str(sweep), "--pair", "slowdown", "--no-mlflow"], tmp_path)
    assert judged.returncode in (0, 1), judged.stderr[-3000:]
    assert "(threshold 2.0%)" in judged.stdout or "regression" in judged.stdout
    table = list(csv.DictReader((sweep / "pair" / "compare.csv").open()))
    assert len(table) == 4 and all(", look " in c["method"] for c in table)
    assert not any(c["verdict"] == "improvement" for c in table), table


def test_one_sweeps_a_and_b_are_judged_round_by_round(tmp_path: Path) -> None:
    """report --pair AXIS: B (the axis's second value) against A, processes paired by
    round: a 5% slowdown in ±10% drift is a regression of each model and of the
    configuration, the gate exits 1; the same sweep with no change exits 0."""
    from benchflow.cli.report import main
    from benchflow.report.pairs import split

    sides = split(_ab_sweep(1.05, seed=4), "slowdown")
    assert (sides.a_value, sides.b_value) == ("null", "0.05")
    changes = compare(
        build_report(sides.base, "none"), build_report(sides.cand, "none"), 0.03, True
    )
    assert {c.model: c.verdict for c in changes} == dict.fromkeys(("m1", "m2", "m3"), "regression")
    assert all("paired t over 6 rounds" in (c.tested.method if c.tested else "") for c in changes)
    (config,) = overall(changes)
    assert config.verdict == "regression" and "3 models" in config.tested.method
    # unpaired, the same rows cannot tell
    unpaired = compare(build_report(sides.base, "none"), build_report(sides.cand, "none"), 0.03)
    assert not any(c.fails for c in unpaired)

    def gate(rows: list[ResultRow], *args: str) -> int:
        path = tmp_path / f"{len(list(tmp_path.iterdir()))}.jsonl"
        path.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in rows))
        out = ["--no-mlflow", "--format", "csv", "--out", str(tmp_path / "out")]
        return main([str(path), *out, *args])

    assert gate(_ab_sweep(1.05, seed=4), "--pair", "slowdown", "--threshold", "3%") == 1
    (judged,) = csv.DictReader((tmp_path / "out" / "configurations.csv").open())
    assert judged["verdict"] == "regression" and judged["models"] == "3", judged
    assert gate(_ab_sweep(1.0, seed=5), "--pair", "slowdown", "--threshold", "3%") == 0
    assert gate(_ab_sweep(1.0, seed=5), "--pair", "dtype") == 2  # not an axis


def _reference(r: ResultRow, seconds: float) -> ResultRow:
    """The row with each process's reference step timed at `seconds` (harness/load.py)."""
    data = r.to_dict()
    for p in data["timing"]["processes"]:
        p["host_reference_s"] = seconds
    return ResultRow.from_dict(data)


def test_a_change_where_the_host_ran_at_another_speed_is_suspicious() -> None:
    """+25%, significant; the same host speed on both sides: a regression. The host's
    reference step 25% slower for the candidate: suspicious (the host can account for
    it), and the gate passes."""
    base = build_report([_reference(_processes("m", [0.0100, 0.0101, 0.0099]), 5e-4)], "none")
    slower = _processes("m", [0.0125, 0.0126, 0.0124])
    same = compare(base, build_report([_reference(slower, 5.1e-4)], "none"), threshold=0.05)
    moved = compare(base, build_report([_reference(slower, 6.25e-4)], "none"), threshold=0.05)
    assert [c.verdict for c in same] == ["regression"]
    ((c,),) = [moved]
    assert c.verdict == "suspicious" and not c.fails
    assert "reference step 25% slower for the candidate than for the baseline" in c.detail
    # +60%: past the threshold even with the host's 25% taken off its interval; and a
    # host faster for the candidate cannot have made it slower: regressions, saying so
    much = _processes("m", [0.0160, 0.0161, 0.0159])
    for ref, words in ((6.25e-4, "less than the change"), (4.0e-4, "the other way")):
        ((c,),) = [compare(base, build_report([_reference(much, ref)], "none"), threshold=0.05)]
        assert c.verdict == "regression" and c.fails, c.detail
        assert words in c.detail


def test_a_row_whose_processes_found_the_host_at_two_speeds_says_so() -> None:
    """Processes whose reference steps lie more than 10% apart: the row's note says the
    host's speed moved between them, and the report's notes count it; within 10% not."""
    rows = [_processes("moved", [0.0100, 0.0125, 0.0101]), _processes("steady", [0.01] * 3)]
    data = [r.to_dict() for r in rows]
    for p, s in zip(data[0]["timing"]["processes"], (4.0e-4, 4.8e-4, 4.1e-4), strict=True):
        p["host_reference_s"] = s
    for p in data[1]["timing"]["processes"]:
        p["host_reference_s"] = 4.0e-4
    rep = build_report([ResultRow.from_dict(d) for d in data], "none")
    notes = {e.model: e.note for e in rep.entries}
    assert "host speed moved 20% between its processes (reference step)" in notes["moved"]
    assert notes["steady"] == ""
    assert any(n.startswith("1 row(s) timed while the host changed speed") for n in rep.notes)


def test_rows_timed_in_several_processes_are_judged_by_their_processes() -> None:
    """Each process's repeats are tight, the processes are not. Judged by repeats, two
    runs of the same job would differ "significantly"; judged by processes (Welch's t on
    their log medians), the same job is no regression, a 30% slowdown still is, and a
    change the processes' spread hides is insufficient data, never no change."""
    base = build_report(
        [
            _processes("aa", [0.0100, 0.0108, 0.0095]),
            _processes("slow", [0.0100, 0.0102, 0.0099]),
            _processes("hidden", [0.0100, 0.0120, 0.0085]),
        ],
        "none",
    )
    cand = build_report(
        [
            _processes("aa", [0.0104, 0.0097, 0.0110]),
            _processes("slow", [0.0130, 0.0131, 0.0128]),
            _processes("hidden", [0.0110, 0.0126, 0.0093]),  # +8% in ±15%
        ],
        "none",
    )
    changes = {c.model: c for c in compare(base, cand, threshold=0.05)}
    assert {m: c.verdict for m, c in changes.items()} == {
        "aa": "insufficient data",
        "slow": "regression",
        "hidden": "insufficient data",
    }
    welch = "Welch's t on log process medians, 3 against 3"
    assert all(c.tested and c.tested.method == welch for c in changes.values())
    # the same rows read as one process each (their repeats pooled): a false alarm
    key = ("aa", "eval", "eager")
    aa_base, aa_cand = base.lookup()[key], cand.lookup()[key]
    assert mann_whitney(aa_base.timed.repeats, aa_cand.timed.repeats) < 0.05
    slow = changes["slow"]
    assert slow.ratio_ci is not None and slow.ratio_ci.low > 1.2
    # the table's interval is the processes' (computed: these rows record none): it holds
    # every process's median
    assert aa_base.ci_low_s is not None and aa_base.ci_high_s is not None
    assert aa_base.ci_low_s < 0.0095 and aa_base.ci_high_s > 0.0108


def test_benjamini_hochberg_keeps_false_alarms_down_over_many_rows() -> None:
    """Forty A/A rows (each side drawn from one distribution) and four real +30% ones:
    uncorrected, a few A/A rows would come out below p = 0.05 by chance; after
    Benjamini-Hochberg none is called changed, and the four real ones still are."""
    base_rows, cand_rows = [], []
    for i in range(44):
        slower = 1.3 if i < 4 else 1.0
        base_rows.append(row(f"m{i}", "eager", _spread(0.01, 10, 0.05, 100 + i)))
        cand_rows.append(row(f"m{i}", "eager", _spread(0.01 * slower, 10, 0.05, 200 + i)))
    # threshold 0: any significant change is called, so only the adjustment stands
    # between a chance p < 0.05 and a false verdict
    changes = compare(build_report(base_rows, "none"), build_report(cand_rows, "none"), 0.0)
    real = {f"m{i}" for i in range(4)}
    same = [c for c in changes if c.model not in real]
    raw = [c for c in same if c.p_value is not None and c.p_value < 0.05]
    assert raw, "the seeds give some chance p < 0.05 among the A/A rows (BH has work to do)"
    assert {c.model: c.verdict for c in changes if c.model in real} == dict.fromkeys(
        real, "regression"
    )
    assert all(c.verdict in ("no significant change", "insufficient data") for c in same)


def test_markdown_csv_and_self_contained_html() -> None:
    from benchflow.report.plots import figures, to_svg

    rep = build_report(ROWS, "inductor")
    md = to_markdown(rep, "t")
    # the geomean over the 2 models with a speedup, of the 5 it has; the others named
    left_out = "c: crashed; d: accuracy FAIL; e: no inductor row: no speedup"
    assert f"| openxla | 3/5 (60%) | 0.71x (0.65-0.77) over 2 of 5 | {left_out} |" in md
    a_row = r"\| a \| eval \| openxla \| ok \| 5\.50 ms \| .* \| 2\.00x \(1\.67-2\.40\) \|"
    assert re.search(a_row, md)
    assert "| c | eval | openxla | crashed |" in md
    lines = list(csv.DictReader(io.StringIO(entries_csv(rep))))
    a = next(r for r in lines if r["model"] == "a" and r["config"] == "openxla")
    assert float(a["per_iter_time_median_s"]) == pytest.approx(0.0055)
    assert float(a["speedup"]) == pytest.approx(2.0) and a["passed"] == "1"
    summ = {r["config"]: r for r in csv.DictReader(io.StringIO(summary_csv(rep)))}
    assert float(summ["openxla"]["passrate"]) == pytest.approx(0.6)
    page = to_html(rep, "t", {n: to_svg(f) for n, f in figures(rep).items()}, {"k": "v"})
    assert page.count("<svg") == 2 and "<script" not in page  # speedups, times
    # a plot with no number to draw is left out: shares above (no FLOPs counted), and
    # speedups without the baseline's rows
    assert set(figures(rep)) == {"speedup", "times"}
    alone = build_report([r for r in ROWS if r.backend != "inductor"], "inductor")
    assert set(figures(alone)) == {"times"}
    # nor a plot of one number: a one-job sweep's report is its table
    assert set(figures(build_report(ROWS[:2], "inductor"))) == {"times"}  # one speedup
    assert figures(build_report(ROWS[:1], "inductor")) == {}
    assert not re.search(r"(src|href)=['\"]https?:", page)  # nothing fetched from outside


def test_a_plot_names_its_configurations_only_while_a_legend_can_be_read() -> None:
    from benchflow.report.plots import MAX_LEGEND, times_figure

    def legend_and_notes(n: int) -> tuple[bool, list[str]]:
        rows = [row("a", "eager", [0.01] * 3, overrides=(f"seed={i}",)) for i in range(n)]
        ax = times_figure(build_report(rows, "eager")).axes[0]
        return ax.get_legend() is not None, [t.get_text() for t in ax.texts]

    has_legend, notes = legend_and_notes(MAX_LEGEND)
    assert has_legend and not any("configurations" in t for t in notes)
    # each configuration's entry in its bars' colour (once every entry drew matplotlib's C0)
    from matplotlib.colors import to_hex

    rows = [row("a", "eager", [0.01] * 3, overrides=(f"seed={i}",)) for i in range(3)]
    ax = times_figure(build_report(rows, "eager")).axes[0]
    legend = [to_hex(h.get_color()) for h in ax.get_legend().legend_handles]
    bars = sorted({to_hex(p.get_facecolor()) for p in ax.patches}, key=legend.index)
    assert legend == bars and len(set(legend)) == 3
    has_legend, notes = legend_and_notes(MAX_LEGEND + 1)
    assert not has_legend and any(f"{MAX_LEGEND + 1} configurations" in t for t in notes)


def _around(median: float) -> list[float]:
    """12 repeats within ±0.6% of `median`, which is their median."""
    return [median * (1 + k / 1000) for k in range(-6, 6)]


def test_the_terminal_report_fits_120_columns_and_names_the_full_files(tmp_path: Path) -> None:
    """However wide the terminal, the printed report keeps within 120 columns with each
    row on one line (its median and speedup whole; a note cut, not wrapped), and ends by
    naming the files that keep every column (report.md keeps ENTRY_HEADER)."""
    from rich.console import Console

    from benchflow.report import output
    from benchflow.report.render import markdown_table, speedup_cell
    from benchflow.report.terminal import WIDTH, print_terminal

    times = {"inductor": 0.0052, "openxla": 0.0031, "eager": 0.0118}
    rows = [
        row(model, backend, _around(t * scale), overrides=("dtype=bfloat16",))
        for model, scale in (("hf_Bert_large", 1), ("resnet50", 2), ("llama", 3))
        for backend, t in times.items()
    ]
    rows += [
        row("dlrm", "inductor", _around(0.002)),
        row("dlrm", "openxla", None, status="crashed", code="VERIFIER_DIDNT_RUN"),
    ]
    rep = build_report(rows, "inductor")
    folder = Path("multirun/2026-11-30/09-00-00/report")
    console = Console(record=True, width=300)
    title = "benchflow sweep multirun/2026-11-30/09-00-00"
    print_terminal(rep, title, full=output.full_report(folder), console=console)
    lines = console.export_text().splitlines()
    assert WIDTH == 120 and max(len(line) for line in lines) <= WIDTH, lines

    def line_of(model: str, config: str) -> str:
        (found,) = [ln for ln in lines if re.match(rf"{model} +│ eval +│ {config} +│", ln)]
        return found

    bert = line_of("hf_Bert_large", "openxla")
    assert re.search(r"│ ok +│ 3.10 ms +│ 3.09-3.11 ms +│", bert)
    by = {(e.model, e.config.label): e for e in rep.entries}
    speedup = speedup_cell(by[("hf_Bert_large", "openxla")], False)
    assert speedup.startswith("1.68x (") and f"│ {speedup} " in bert
    assert "│ 10.40 ms " in line_of("resnet50", "inductor")
    assert "│ (baseline) " in line_of("resnet50", "inductor")
    assert "│ 35.40 ms " in line_of("llama", "eager")
    dlrm = line_of("dlrm", "openxla")
    assert "│ crashed " in dlrm and "│ crashed: not in" in dlrm
    assert dlrm.endswith("…") and len(dlrm) == WIDTH  # its note cut to what is left
    assert "geomean speedup (95% CI)" in "".join(lines)
    assert lines[-1] == (
        "full report (every column, how each number is computed): report.md, report.html "
        f"in {folder}/"
    )
    # report.md keeps every column, and the whole note
    (md,) = output.write(rep, tmp_path, title, {}, formats=("md",))
    text = md.read_text()
    assert markdown_table(ENTRY_HEADER, []) in text
    # (a crashed row read no signals: its counts are missing, not "does not apply")
    assert "| VERIFIER_DIDNT_RUN | - | - | - | crashed: not in the geomean |" in text


def test_headline_metrics_sort_together() -> None:
    m = headline_metrics(ROWS[1])
    assert set(m) == {
        "headline.per_iter_time_s",
        "headline.per_iter_time_iqr_s",
        "headline.compile_time_s",
        "headline.peak_memory_bytes",
    }
    assert m["headline.per_iter_time_s"] == pytest.approx(0.0055)


def test_bad_input_is_named(tmp_path: Path) -> None:
    res = run_cli(["report", str(tmp_path / "nope" / "results.jsonl")], tmp_path)
    assert res.returncode == 2 and "no such file or folder" in res.stderr
    (tmp_path / "empty").mkdir()
    res = run_cli(["report", str(tmp_path / "empty")], tmp_path)
    assert res.returncode == 2 and "has no results.jsonl" in res.stderr
    res = run_cli(["report", "x", "--threshold", "lots"], tmp_path)
    assert res.returncode == 2 and "--threshold='lots' is not a number" in res.stderr
    res = run_cli(["report", "x", "--format", "md,pdf"], tmp_path)
    assert res.returncode == 2 and "unknown pdf; allowed" in res.stderr


# --- real sweeps -------------------------------------------------------------------

SWEEP = [
    "-m",
    SEARCHPATH,
    # eager and a compiled backend; aot_eager compiles in seconds where Inductor takes tens
    "dynamo=none,aot_eager",
    "baseline=aot_eager",
    "model.size=tiny",
    # 7 against 7: a planted 10x slowdown stays significant with a contended repeat or
    # two on a side (with 5 against 5, one baseline repeat at 4x its median, under the
    # suite's load, left p = 0.15)
    "repeat=7",
    "iterations_per_run=3",
    "warmup=1",
    "dtype=float32",
]


@early("report", niced=False)  # the gate compares the two sweeps' times
def _base_then_slowed(cwd: Path) -> dict[str, CliResult]:
    """A base sweep of `work`, then the same sweep with `work` 10x slower, in one store;
    then the gate: base against itself, and slowed against base."""
    base = run_cli([*SWEEP, "model=work", "hydra.sweep.dir=multirun/base"], cwd)
    if base.returncode != 0:
        return {"base": base, "slowed": base}
    slowed = run_cli([*SWEEP, "model=work_slowed", "hydra.sweep.dir=multirun/slowed"], cwd)
    got = {"base": base, "slowed": slowed}
    if slowed.returncode == 0:
        runs = cwd / "multirun"
        same = ["report", str(runs / "base"), "--compare", str(runs / "base"), "--no-mlflow"]
        got["same"] = run_cli(same, runs)
        gate = ["report", str(runs / "slowed"), "--compare", str(runs / "base"), "--no-mlflow"]
        got["gate"] = run_cli(gate, runs)
    return got


@pytest.fixture(scope="module")
def gate(early_sweeps: EarlySweeps) -> dict[str, CliResult]:
    got: dict[str, CliResult] = early_sweeps.result("report")
    assert got["base"].returncode == 0, got["base"].stderr[-3000:]
    assert got["slowed"].returncode == 0, got["slowed"].stderr[-3000:]
    return got


@pytest.fixture(scope="module")
def sweeps(gate: dict[str, CliResult]) -> tuple[CliResult, Path, Path]:
    slow = gate["slowed"]
    return slow, slow.cwd / "multirun" / "base", slow.cwd / "multirun" / "slowed"


def test_sweep_end_writes_the_report_and_logs_it(sweeps: tuple[CliResult, Path, Path]) -> None:
    from mlflow.tracking import MlflowClient

    res, _, slowed = sweeps
    out = slowed / "report"
    assert {p.name for p in out.iterdir()} >= {
        "report.md",
        "report.csv",
        "summary.csv",
        "report.html",
        "times.png",  # eager and aot_eager; one speedup is a number, not a plot
    }
    assert not (out / "speedup.png").exists()
    assert "| work | eval | eager | ok |" in (out / "report.md").read_text()
    assert "geomean speedup" in res.stdout and "work" in res.stdout
    client = MlflowClient(f"sqlite:///{res.cwd / 'mlflow.db'}")
    parent = (slowed / "mlflow_parent_run.txt").read_text().strip()
    logged = {a.path for a in client.list_artifacts(parent, "report")}
    assert {"report/report.html", "report/times.png"} <= logged
    metrics = client.get_run(parent).data.metrics
    assert metrics["report.aot_eager.passrate"] == 1.0
    rows = [json.loads(x) for x in (slowed / "results.jsonl").read_text().splitlines()]
    # Every passing row is in the geomean (its interval carries the noise), and its
    # bounds are logged beside it.
    typed = [ResultRow.from_dict(r) for r in rows]
    (eager_summary,) = [
        s for s in build_report(typed, baseline="aot_eager").summaries if s.config.label == "eager"
    ]
    assert eager_summary.geomean_speedup is not None and eager_summary.geomean_ci is not None
    assert metrics["report.eager.geomean_speedup"] == pytest.approx(eager_summary.geomean_speedup)
    assert metrics["report.eager.geomean_speedup_ci_low"] == pytest.approx(
        eager_summary.geomean_ci.low
    )
    assert metrics["report.eager.geomean_speedup_ci_high"] == pytest.approx(
        eager_summary.geomean_ci.high
    )
    eager = next(r for r in rows if r["experiment"]["dynamo"] is None)
    child = client.get_run(eager["job"]["mlflow_run_id"])
    assert child.data.params["backend"] == "eager"
    assert child.data.metrics["headline.per_iter_time_s"] == pytest.approx(
        eager["summary"]["per_iter_time_s"]["median"]
    )
    # the speedup the report computed went back onto the job's run
    ind = next(r for r in rows if r["experiment"]["dynamo"] == "aot_eager")
    expected = (
        ind["summary"]["per_iter_time_s"]["median"] / eager["summary"]["per_iter_time_s"]["median"]
    )
    assert child.data.metrics["headline.speedup_vs_aot_eager"] == pytest.approx(expected)


def test_rows_carry_flops_with_intervals_and_the_report_and_mlflow_show_them(
    sweeps: tuple[CliResult, Path, Path],
) -> None:
    """`work` is MatmulChain: 8 linear layers of n x n on a batch of 512, 80 in the
    slowed sweep. Each row's FLOPs are those matmuls' (docs/flops.md), the same for
    eager and aot_eager; its 7 repeats give its time an interval, and the FLOP/s and
    share of peak theirs (the time's bounds, swapped); the report, its CSV and MLflow
    (each job's run, the sweep's run) show them."""
    from mlflow.tracking import MlflowClient
    from tests.models.faults import MatmulChain

    from benchflow.results.headline import FLOP_METRICS

    res, base, slowed = sweeps
    client = MlflowClient(f"sqlite:///{res.cwd / 'mlflow.db'}")
    n = MatmulChain.SIZES["tiny"]["n"]
    for folder, layers in ((base, 8), (slowed, 80)):
        rows = [json.loads(x) for x in (folder / "results.jsonl").read_text().splitlines()]
        assert [r["backend"] for r in rows] == ["eager", "aot_eager"]
        for r in rows:
            f, name = r["flops"], r["job"]["name"]
            assert f["per_step"] == layers * 2 * r["experiment"]["batch_size"] * n * n, name
            assert f["top"] == {"aten.mm": f["per_step"]} and f["uncounted"] == [], name
            time = r["summary"]["per_iter_time_s"]
            assert f["per_s_ci_low"] == pytest.approx(f["per_step"] / time["ci_high"]), name
            assert f["per_s_ci_high"] == pytest.approx(f["per_step"] / time["ci_low"]), name
            assert f["per_s_ci_low"] <= f["per_s"] <= f["per_s_ci_high"], name
            peak = f["peak"]
            assert peak["dtype"] == "float32" and peak["threads"] == 1, name
            assert peak["flop_per_s"] == max(max(run) for run in peak["runs"]) > 0, name
            shares = (f["share_ci_low"], f["share_of_peak"], f["share_ci_high"])
            assert 0 < shares[0] <= shares[1] <= shares[2], name
            assert f["share_of_peak"] == pytest.approx(f["per_s"] / peak["flop_per_s"]), name
            metrics = client.get_run(r["job"]["mlflow_run_id"]).data.metrics
            assert set(FLOP_METRICS) <= set(metrics), name  # every one, the bounds too
            assert metrics["headline.flop_per_s_ci_low"] == pytest.approx(f["per_s_ci_low"])
            assert metrics["headline.share_of_peak"] == pytest.approx(f["share_of_peak"])
        report = folder / "report"
        md = (report / "report.md").read_text()
        assert "| FLOP/s (95% CI) | share of peak (95% CI) |" in md
        eager = next(ln for ln in md.splitlines() if ln.startswith("| work | eval | eager |"))
        assert re.search(r"\| \d+(\.\d+)? GFLOP/s \(\d+(\.\d+)?-\d+(\.\d+)?\) \|", eager), eager
        assert re.search(r"\| \d+\.\d% \(\d+\.\d%-\d+\.\d%\) \|", eager), eager
        (csv_eager, _) = csv.DictReader((report / "report.csv").open())
        assert float(csv_eager["flop_per_s_ci_low"]) == pytest.approx(
            rows[0]["flops"]["per_s_ci_low"], rel=1e-5
        )
        summary = {s["config"]: s for s in csv.DictReader((report / "summary.csv").open())}
        assert float(summary["eager"]["geomean_share_of_peak"]) == pytest.approx(
            rows[0]["flops"]["share_of_peak"], rel=1e-5
        )
        parent = client.get_run((folder / "mlflow_parent_run.txt").read_text().strip())
        assert parent.data.metrics["report.aot_eager.geomean_share_of_peak"] == pytest.approx(
            rows[1]["flops"]["share_of_peak"]
        )


def test_same_sweep_is_no_regression(
    gate: dict[str, CliResult], sweeps: tuple[CliResult, Path, Path]
) -> None:
    _, base, _ = sweeps
    res = gate["same"]
    assert res.returncode == 0, res.stderr
    assert "no regression" in res.stdout
    changes = list(csv.DictReader((base / "compare" / "compare.csv").open()))
    # the same samples on both sides: p = 1; "no significant change" where the ratio's
    # interval lies within the threshold, else (a noisy host: the sweeps run beside
    # the other tests) "insufficient data", never a change
    assert all(float(c["p_value"]) == 1.0 for c in changes)
    # repeat=7: one process a job, so its repeats are what is compared, and it says so
    assert all(c["method"] == "Mann-Whitney U on repeats, 7 against 7" for c in changes)
    for c in changes:
        within = float(c["ratio_ci_low"]) >= 1 / 1.05 and float(c["ratio_ci_high"]) <= 1.05
        assert c["verdict"] == ("no significant change" if within else "insufficient data"), c


def test_planted_slowdown_fails_the_gate(
    gate: dict[str, CliResult], sweeps: tuple[CliResult, Path, Path]
) -> None:
    _, _, slowed = sweeps
    res = gate["gate"]
    table = (slowed / "compare" / "compare.csv").read_text()
    changes = {c["config"]: c for c in csv.DictReader(table.splitlines())}
    # 10x the matmuls. A busy host (the session sweeps run beside this) narrows the gap
    # a lot: one CI run saw 2.5x, its base sweep timed while the host was busiest.
    assert float(changes["eager"]["ratio"]) > 1.5, table
    assert float(changes["eager"]["p_value"]) < 0.05, table  # 7 against 7
    # Where a side's rows say the host was busy, the verdict says so and does not fail
    # the gate; on a quiet host it is a regression, and the gate fails.
    eager = [
        row.timing
        for side in ("base", "slowed")
        for line in (slowed.parent / side / "results.jsonl").read_text().splitlines()
        if (row := ResultRow.from_dict(json.loads(line))).backend == "eager"
    ]
    assert len(eager) == 2
    quiet = all(t and t.host and t.host.get("quiet") for t in eager)  # eager's rows alone
    if quiet:
        assert changes["eager"]["verdict"] == "regression", table
        assert res.returncode == 1, res.stdout + res.stderr
        assert "regression(s)" in res.stderr and "work/eager (regression)" in res.stderr
        assert "regression" in (slowed / "compare" / "report.md").read_text()
    else:
        assert changes["eager"]["verdict"] == "suspicious", table
        assert "busy host" in changes["eager"]["detail"], table


def test_report_from_mlflow_matches_the_folder(
    sweeps: tuple[CliResult, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`benchflow report`'s own entry point, in this process (the command line around it
    is checked through a real process in test_mlflow_server: a report by parent run id
    from a real server); the store is the default one of the sweeps' folder."""
    from benchflow.cli.report import main as report

    res, base, _ = sweeps
    monkeypatch.chdir(res.cwd)
    parent = (base / "mlflow_parent_run.txt").read_text().strip()
    out = res.cwd / "from_mlflow"
    # No --baseline: the sweep's own (baseline=aot_eager), from its parent run's tag, so
    # the report is the one the sweep wrote; a folder names it in its plan.json.
    assert load(str(base)).baseline == "aot_eager"
    assert report([parent, "--out", str(out), "--no-mlflow"]) == 0
    folder = (base / "report" / "report.csv").read_text()
    assert (out / "report.csv").read_text() == folder
    assert report(["experiment:benchflow", "--out", str(res.cwd / "exp")]) == 0
    # the experiment holds both sweeps: a later row of the same configuration wins
    text = (res.cwd / "exp" / "report.md").read_text()
    assert "replaced by later ones" in text


def _mixed_grid_rows() -> list[ResultRow]:
    """The issue-12 grid, planned for real (Hydra composition, the registry, the suite's
    rules) and recorded with build_row; the child's part is made up: eager 4 ms, lazy
    XLA 8 ms, inductor 2 ms, openxla 1 ms for every model. Invalid pairs come last, as
    in the sweep that showed inductor replaced by them."""
    from hydra import compose, initialize_config_dir

    from benchflow.config.store import CONF_DIR, register
    from benchflow.results.child import ChildResult
    from benchflow.results.row import build_row
    from benchflow.sweep.plan import plan_job

    register()
    times = {"eager": 0.004, "lazy_xla": 0.008, "inductor": 0.002, "openxla": 0.001}
    rows, invalid = [], []
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        num = 0
        for model in ("llama", "dlrm"):
            for dynamo in ("none", "inductor", "openxla"):
                for xla in ("auto", "PJRT"):
                    overrides = [f"model={model}", f"dynamo={dynamo}", f"xla={xla}"]
                    job = plan_job(compose("config", overrides), num, overrides)
                    num += 1
                    if job.invalid:
                        made = build_row(job, status=Status.INVALID, error=job.invalid)
                        invalid.append(made)
                        continue
                    if any(r.job.fingerprint == job.fingerprint for r in rows):
                        continue  # the sweep keeps the first row of a configuration
                    t = times[job.backend]
                    child = ChildResult(
                        metrics={"per_iter_time_s": [t] * 3, "first_iter_time_s": t + 0.5},
                        summary={"per_iter_time_s": {"median": t, "iqr": 0.0}},
                    )
                    rows.append(build_row(job, status=Status.OK, error=None, child=child))
    return rows + invalid


def test_mixed_grid_invalid_pairs_are_no_configuration() -> None:
    rows = _mixed_grid_rows()
    rep = build_report(rows, baseline="inductor")
    assert [s.config.label for s in rep.summaries] == ["eager", "lazy_xla", "inductor", "openxla"]
    assert not any("replaced" in n for n in rep.notes), rep.notes
    speed = {s.config.label: s.geomean_speedup for s in rep.summaries}
    assert speed == pytest.approx({"eager": 0.5, "lazy_xla": 0.25, "inductor": 1.0, "openxla": 2.0})
    assert [(i.model, i.settings) for i in rep.invalid] == [
        ("llama", "dynamo=inductor xla=PJRT"),
        ("dlrm", "dynamo=inductor xla=PJRT"),
    ]
    assert all("does not compile for the XLA device" in i.reason for i in rep.invalid)
    # compile time: a number for backends that compile, "–" (does not apply) for eager
    eager = next(e for e in rep.entries if e.config.label == "eager")
    assert eager.compile_s is None and not eager.compiles
    lazy = next(e for e in rep.entries if e.config.label == "lazy_xla")
    assert lazy.compile_s == pytest.approx(0.5)
    md = to_markdown(rep, "mixed")
    assert "| llama | eval | eager | ok | 4.00 ms |" in md
    eager_line = next(ln for ln in md.splitlines() if ln.startswith("| llama | eval | eager |"))
    compile_col = ENTRY_HEADER.index("compile")
    assert [c.strip() for c in eager_line.split("|")[1:-1]][compile_col] == "–"
    summary_line = next(ln for ln in md.splitlines() if ln.startswith("| eager |"))
    mean_col = SUMMARY_HEADER.index("mean compile")
    assert [c.strip() for c in summary_line.split("|")[1:-1]][mean_col] == "–"
    assert "## Invalid combinations" in md and "dynamo=inductor xla=PJRT" in md
    # the old shape of the same rows (status=skipped, no config) reads the same way
    old = [
        {k: v for k, v in r.to_dict().items() if k not in ("config", "backend", "schema_version")}
        | ({"status": "skipped"} if r.status is Status.INVALID else {})
        for r in rows
    ]
    again = build_report([ResultRow.from_dict(r) for r in old], baseline="inductor")
    assert [s.config.label for s in again.summaries] == [s.config.label for s in rep.summaries]
    assert len(again.invalid) == 2
