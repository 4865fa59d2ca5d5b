"""`benchflow rerun WHAT`: recorded jobs (tracking/recorded.py finds them), planned again
from the resolved config each ran with, not the command line, so that the same row gives
the same fingerprint; its Origin lets the new row say what it reran and what differs.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import Any

from benchflow.config.errors import ConfigError
from benchflow.core.job import Job, Origin
from benchflow.tracking.recorded import Recorded


def plan(
    records: Sequence[Recorded], extras: Sequence[str], config_dirs: Sequence[str]
) -> list[Job]:
    """One job per record, from its recorded config, changed by `extras` (`changes`)."""
    from omegaconf import OmegaConf

    from benchflow.sweep.plan import plan_job

    jobs = []
    for num, rec in enumerate(records):
        recorded = list(rec.row.job.overrides)
        node = OmegaConf.structured(rec.config)
        for key, value in changes(recorded, extras, config_dirs).items():
            OmegaConf.update(node, key, value, merge=False, force_add=False)
        job = plan_job(node, num, [*recorded, *extras])
        if not extras:
            # as it ran: re-resolving changes only what the machine did
            exp = rec.row.experiment
            given = {"dtype_source": exp.dtype_source, "batch_size_source": exp.batch_size_source}
            sources = {k: v for k, v in given.items() if v}
            job = dataclasses.replace(
                job, name=rec.row.job.name or job.name, config=rec.config, sources=sources
            )
        origin = Origin(
            row_id=rec.row.row_id,
            fingerprint=rec.row.job.fingerprint,
            mlflow_run_id=rec.row.job.mlflow_run_id,
            digest=rec.row.digest,
            provenance=rec.row.to_dict()["provenance"],
        )
        jobs.append(dataclasses.replace(job, origin=origin))
    return jobs


def changes(
    recorded: Sequence[str], extras: Sequence[str], config_dirs: Sequence[str]
) -> dict[str, Any]:
    """The leaves `extras` change in a job's composed config, as they would in a sweep's."""
    if not extras:
        return {}
    before = _composed(tuple(recorded), tuple(config_dirs))
    after = _composed((*recorded, *extras), tuple(config_dirs))
    return {k: v for k, v in after.items() if k not in before or before[k] != v}


@functools.cache
def _composed(overrides: tuple[str, ...], config_dirs: tuple[str, ...]) -> dict[str, Any]:
    """A job's composed config, flat, without the hydra node (cached: do not change it)."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    from benchflow.config.store import CONF_DIR
    from benchflow.tracking.mlflow_runs import flatten

    search = [f"hydra.searchpath=[{','.join('file://' + d for d in config_dirs)}]"]
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = compose("config", overrides=[*(search if config_dirs else []), *overrides])
    except (HydraException, OmegaConfBaseException) as exc:
        raise ConfigError(f"{' '.join(overrides)}: {exc}") from None
    data = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(data, dict)
    data.pop("hydra", None)
    return flatten(data)
