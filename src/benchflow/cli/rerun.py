"""`benchflow rerun WHAT [key=value ...]`: run recorded jobs again."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import time
from collections.abc import Sequence
from pathlib import Path

from benchflow.cli import command_parser, refuse
from benchflow.config.errors import ConfigError
from benchflow.core.job import Job
from benchflow.results.environment import Difference, differences
from benchflow.results.row import Provenance, ResultRow

DESCRIPTION = """\
Run recorded jobs again, each from the resolved config it ran with (its job folder's
config.yaml, or its MLflow run's), into a new sweep folder and new MLflow runs.

WHAT is a sweep folder (all its current jobs), a job folder, a results.jsonl or
result.json, one line of a results.jsonl, a row_id, or an MLflow run id (a sweep's
parent run: all its jobs; row:<id> / run:<id> to say which an id is).

Each new row has the fingerprint of the row it reran (unless an extra key=value
changes the config, as it would change a sweep's) and names it in job.rerun_of.
Before running, the command prints what differs from the recorded environment; each
new row then says which speed facts differ from its original's (job.rerun_env) and
whether the first output's digest was reproduced within the suite's accuracy
tolerance (job.rerun_digest). At the end it prints old and new medians side by side.
"""

EPILOG = """\
examples:
  benchflow rerun multirun/2026-11-24/10-06-10
  benchflow rerun multirun/2026-11-24/10-06-10 repeat=10
  benchflow rerun 3f2c...e1 --tracking-uri http://127.0.0.1:5000

exit codes: 0 the jobs ran (see each row's status), 2 bad input (nothing was run).
"""


def parser() -> argparse.ArgumentParser:
    p = command_parser("rerun", DESCRIPTION, EPILOG)
    p.add_argument("what", metavar="WHAT", help="the recorded jobs (see above)")
    p.add_argument(
        "overrides",
        nargs="*",
        metavar="key=value",
        help="changes to every job's recorded config (a new fingerprint where measured)",
    )
    p.add_argument(
        "--tracking-uri",
        help="the MLflow store to find run ids in and to log the new runs to (default: "
        "the one each job recorded, else ./mlflow.db)",
    )
    p.add_argument(
        "--config-dir",
        action="append",
        default=[],
        metavar="DIR",
        help="a config folder the recorded jobs' options come from (default: the ones "
        "their command named)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the jobs and the environment's differences; run nothing",
    )
    return p


def _check_overrides(overrides: Sequence[str]) -> str | None:
    """Why an extra override cannot apply to a rerun (None: it can)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    from benchflow.config.keys import unknown_key
    from benchflow.config.store import groups

    known = groups()
    for arg in overrides:
        key, sep, _ = arg.partition("=")
        if not sep or arg.startswith(("-", "+", "~", "hydra")):
            return (
                f"{arg}: not a key=value of benchflow's config; allowed: key=value "
                "(group=option or a dotted key), one value each, hydra.searchpath and "
                "hydra.sweep.dir"
            )
        if key == "experiment":
            return f"{arg}: an experiment file sets many keys; allowed: the keys themselves"
        if key not in known and (why := unknown_key(key, known)):
            return f"{arg}: {why}"
    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except HydraException as exc:
        return str(exc)
    if sweep := next((o for o in parsed if o.is_sweep_override()), None):
        return (
            f"{sweep.input_line}: a rerun runs each recorded job once; allowed: one value "
            "per key (sweep it with `benchflow -m` instead)"
        )
    return None


def _config_dirs(given: Sequence[str], rows: Sequence[ResultRow]) -> list[str]:
    """The rerun's --config-dir folders, then those the recorded commands named."""
    from benchflow.config.store import user_config_dirs

    found = [str(Path(d).expanduser().resolve()) for d in given]
    for row in rows:
        try:
            words = shlex.split(row.provenance.command or "")
        except ValueError:
            continue
        found += [str(d) for d in user_config_dirs(words) if d.is_dir()]
    return list(dict.fromkeys(found))


def _register(jobs_overrides: Sequence[str], torchbench_root: str | None) -> None:
    """Model options the recorded overrides may name (TorchBench's, a suite's)."""
    from benchflow.models.torchbench_index import register_torchbench
    from benchflow.suite.suites import register_suite_models

    register_torchbench(torchbench_root)
    register_suite_models(jobs_overrides)


def _now_vs_recorded(
    rows: Sequence[ResultRow], jobs: Sequence[Job], project: Path
) -> list[Difference]:
    """What differs between the recorded environment and a job's now, in the facts known
    before a job runs (less what benchflow sets for each job)."""
    from benchflow.core.cpus import child_env
    from benchflow.core.gpus import ENV_VISIBLE
    from benchflow.core.layout import JobDir
    from benchflow.results.provenance import provenance, speed_env, versions
    from benchflow.sweep.process import launch_env

    per_job_env = set(child_env([0], None)) | {ENV_VISIBLE}  # its CPU and GPU slots

    def comparable(prov: Provenance, job: Job) -> Provenance:
        """Less what benchflow sets: the CPUs' variables, and those of the job's own
        settings (`env.NAME`, `xla.flags`), which the rerun sets again."""
        own = per_job_env | set(launch_env(job, JobDir(project)))
        hardware = prov.hardware and dataclasses.replace(prov.hardware, affinity=None, gpu=None)
        env = {k: v for k, v in prov.env.items() if k not in own}
        return dataclasses.replace(prov, hardware=hardware, env=env)

    now = []
    for job in jobs:
        cfg = job.config
        root = cfg.suite.torchbench_root if cfg.model.source == "torchbench" else None
        prov = provenance(project, root)
        now.append(
            dataclasses.replace(
                prov, versions=versions(cfg.model.source), env=speed_env(os.environ)
            )
        )
    recorded = [comparable(r.provenance, job) for r, job in zip(rows, jobs, strict=True)]
    return differences(recorded, [comparable(p, job) for p, job in zip(now, jobs, strict=True)])


def _new_sweep_dir() -> Path:
    stamp = time.strftime("%Y-%m-%d/%H-%M-%S")
    path = Path("multirun") / f"{stamp}-rerun"
    n = 1
    while path.exists():
        n += 1
        path = Path("multirun") / f"{stamp}-rerun{n}"
    return path


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_intermixed_args(argv)  # options may come after key=value
    from benchflow.config.store import user_config_dirs
    from benchflow.sweep import rerun
    from benchflow.tracking import recorded

    # Hydra's own way to add config folders, as a sweep takes it.
    searchpath = [a for a in args.overrides if a.startswith("hydra.searchpath=")]
    args.overrides = [a for a in args.overrides if a not in searchpath]
    args.config_dir += [str(d) for d in user_config_dirs(searchpath)]
    # Where the rerun's sweep goes, said as for any sweep (default: a new multirun/ folder).
    named = [a.split("=", 1)[1] for a in args.overrides if a.startswith("hydra.sweep.dir=")]
    args.overrides = [a for a in args.overrides if not a.startswith("hydra.sweep.dir=")]
    if named and (Path(named[-1]).is_file() or any(Path(named[-1]).glob("*"))):
        return refuse(
            "rerun",
            f"hydra.sweep.dir={named[-1]}: the folder is not empty; allowed: a new or "
            "empty folder (a rerun's rows never mix with another sweep's)",
        )
    if why := _check_overrides(args.overrides):
        return refuse("rerun", why)
    project = Path.cwd()
    try:
        records = recorded.find(args.what, args.tracking_uri, project)
    except recorded.RerunError as exc:
        return refuse("rerun", exc)
    rows = [rec.row for rec in records]
    dirs = _config_dirs(args.config_dir, rows)
    roots = [
        r.config.suite.torchbench_root for r in records if r.config.model.source == "torchbench"
    ]
    root = next((r for r in roots if r), None)
    _register([o for r in rows for o in r.job.overrides], root)
    try:
        jobs = rerun.plan(records, args.overrides, dirs)
    except ConfigError as exc:
        return refuse("rerun", exc)
    if args.tracking_uri:
        jobs = [_logging_to(job, args.tracking_uri) for job in jobs]

    what = f"the row {rows[0].row_id}" if args.what.lstrip().startswith("{") else args.what
    print(f"benchflow rerun: {len(jobs)} job(s) of {what}")
    for job, row in zip(jobs, rows, strict=True):
        same = "same fingerprint" if job.fingerprint == row.job.fingerprint else "NEW fingerprint"
        print(f"  {row.row_id[:12]}  {job.name:<40} {same} {job.fingerprint[:12]}")
    diffs = _now_vs_recorded(rows, jobs, project)
    if diffs:
        print("environment: differs from the recorded one in")
        for d in diffs:
            print(f"  {d}{'   (can change speed)' if d.speed else ''}")
    else:
        print("environment: the same as recorded (the facts known before a job runs)")
    if args.dry_run:
        return 0

    sweep_dir = Path(named[-1]) if named else _new_sweep_dir()
    first = jobs[0].config
    argv_out = [
        "-m",
        f"hydra.sweep.dir={sweep_dir}",
        *([f"hydra.searchpath=[{','.join('file://' + d for d in dirs)}]"] if dirs else []),
        f"mlflow.enabled={str(first.mlflow.enabled).lower()}",
        f"mlflow.experiment={first.mlflow.experiment}",
        *(
            [f"mlflow.tracking_uri={first.mlflow.tracking_uri}"]
            if first.mlflow.tracking_uri
            else []
        ),
        *([f"suite.torchbench_root={root}"] if root else []),
    ]
    code = _run_planned(jobs, argv_out)
    _summary(sweep_dir, rows)
    return code


def _run_planned(jobs: Sequence[Job], argv: Sequence[str]) -> int:
    """The sweep runs these jobs as planned: their plan, handed to the sweeper as a file
    (hydra.sweeper.plan), which writes it into the sweep's folder as its plan.json."""
    import tempfile

    from benchflow.cli.sweep import main as sweep
    from benchflow.core.job import Plan

    with tempfile.TemporaryDirectory(prefix="benchflow-rerun-") as tmp:
        given = Path(tmp) / "plan.json"
        given.write_text(json.dumps(Plan.of(jobs).to_dict()))
        try:
            return sweep([*argv, f"hydra.sweeper.plan={given}"])
        except SystemExit as exc:  # Hydra's and the checks' own exits
            return exc.code if isinstance(exc.code, int) else 1


def _logging_to(job: Job, uri: str) -> Job:
    cfg = job.config
    mlflow = dataclasses.replace(cfg.mlflow, tracking_uri=uri)
    return dataclasses.replace(job, config=dataclasses.replace(cfg, mlflow=mlflow))


def _median(row: ResultRow | None) -> float | None:
    found = (row.summary.get("per_iter_time_s") or {}).get("median") if row else None
    return float(found) if found is not None else None


def _summary(sweep_dir: Path, originals: Sequence[ResultRow]) -> None:
    """Each rerun row beside the row it reran: medians, digest, environment."""
    from benchflow.core.layout import SweepDir
    from benchflow.results.io import current, read_rows

    new = {r.job.rerun_of: r for r in current(read_rows(SweepDir(sweep_dir).results))}
    print(f"\nbenchflow rerun: {sweep_dir}")
    print(f"  {'job':<40} {'recorded':>10} {'rerun':>10} {'ratio':>6}  digest")
    for old in originals:
        row = new.get(old.row_id)
        before, after = _median(old), _median(row)
        ratio = f"{after / before:.2f}" if before and after else "-"

        def ms(v: float | None) -> str:
            return f"{v * 1e3:.3f}ms" if v is not None else "-"

        digest = (row.job.rerun_digest if row else None) or "-"
        print(f"  {old.job.name:<40} {ms(before):>10} {ms(after):>10} {ratio:>6}  {digest}")
        if row and row.status.value != "ok":
            print(f"    status {row.status.value}: {row.error or ''}")
        if row and row.job.rerun_env:
            print(f"    environment differs: {'; '.join(row.job.rerun_env)}")
