"""MLflow logging, done by the parent so that every job has a run, whatever its fate.

One sweep is one parent run; each job a child run, opened before its child starts and
closed after it ends. MlflowClient is used directly, with no global "active run", so
concurrent launchers cannot cross their runs. Tracking problems never fail a job.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from benchflow.config.schema import MlflowConfig
from benchflow.core.status import status_of

log = logging.getLogger(__name__)

# The sweep's parent run's tag naming its `baseline=` (what its report's speedups are over).
BASELINE_TAG = "benchflow.baseline"
# What a run that is not a job's is (a sweep's parent run, a history's run).
KIND_TAG = "benchflow.kind"
KIND_SWEEP = "sweep"
KIND_HISTORY = "history"
PARENT_TAG = "mlflow.parentRunId"  # MLflow's own: a job run's sweep run
SWEEP_DIR_TAG = "sweep_dir"  # a sweep run's folder


def check_reachable(cfg: MlflowConfig, timeout_s: float = 5.0) -> str | None:
    """Why runs cannot be logged to mlflow.tracking_uri (None: they can): asked before any
    job, as MLflow's client would fail or retry for minutes, job after job."""
    import urllib.error
    import urllib.request

    uri = cfg.tracking_uri
    if not cfg.enabled or not uri:
        return None
    if why := _unknown_scheme(uri):
        return why
    if not uri.startswith(("http://", "https://")):
        return None
    try:
        with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=timeout_s) as r:
            if r.status == 200:
                return None
            reason = f"HTTP {r.status}"
    except urllib.error.HTTPError as exc:
        reason = f"HTTP {exc.code} from {uri}/health"
    except (OSError, ValueError) as exc:
        reason = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
    return (
        f"mlflow.tracking_uri={uri}: no MLflow server answers ({reason}); allowed: the URL "
        "of a running `mlflow server`, no value (the local store mlflow.db), or "
        "mlflow.enabled=false"
    )


def _unknown_scheme(uri: str) -> str | None:
    """The URI's scheme, when MLflow's registry (built-in stores and plugins) has no
    tracking store for it. A plain path never imports MLflow here: the import is slow."""
    from urllib.parse import urlparse

    if not urlparse(uri).scheme:  # a path: MLflow's file store
        return None
    from mlflow.tracking._tracking_service.utils import _tracking_store_registry
    from mlflow.utils.uri import get_uri_scheme

    stores = _tracking_store_registry._registry  # scheme -> store builder
    scheme = get_uri_scheme(uri)
    if scheme in stores or uri in stores:  # databricks, uc: a bare scheme names a store
        return None
    allowed = ", ".join(sorted(s for s in stores if s))
    return (
        f"mlflow.tracking_uri={uri}: MLflow has no tracking store for scheme {scheme!r}; "
        f"allowed: a path, or a URI of scheme {allowed} (the local store mlflow.db when "
        "no value), or mlflow.enabled=false"
    )


def default_tracking_uri(project_dir: Path) -> str:
    return f"sqlite:///{(project_dir / 'mlflow.db').resolve()}"


def seed_sqlite_store(uri: str) -> bool:
    """Make a new SQLite store a copy of an empty one at MLflow's schema head.

    MLflow creates a new store by running every schema migration, which each sweep in a
    new folder would wait for; the migrated, empty database is kept once per MLflow
    version under the cache root and copied. True when the store was seeded; False (and
    MLflow creates it as before) otherwise, or when anything here fails."""
    import os
    import shutil

    prefix = "sqlite:///"
    if not uri.startswith(prefix) or "?" in uri:
        return False
    target = Path(uri[len(prefix) :])
    if target.exists() or not target.parent.is_dir():
        return False
    try:
        template = _empty_store_template()
        staged = target.with_name(f".{target.name}.{os.getpid()}.seed")
        shutil.copyfile(template, staged)
        try:
            os.link(staged, target)  # only where no store is yet: never over one
        except FileExistsError:
            return False
        finally:
            staged.unlink(missing_ok=True)
    except Exception as exc:  # MLflow's own creation is the fallback
        log.debug("MLflow store not seeded (%s): MLflow creates it", exc)
        return False
    return True


def _empty_store_template() -> Path:
    """The cached empty store of this MLflow version, made on first use."""
    import os

    import mlflow

    from benchflow.core.layout import cache_root

    path = cache_root() / "mlflow" / f"empty-store-{mlflow.__version__}.db"
    if path.exists():
        return path
    import sqlalchemy
    from mlflow.store.db.utils import _initialize_tables

    path.parent.mkdir(parents=True, exist_ok=True)
    staged = path.with_name(f".{path.name}.{os.getpid()}")
    staged.unlink(missing_ok=True)
    engine = sqlalchemy.create_engine(f"sqlite:///{staged}")
    try:
        _initialize_tables(engine)  # MLflow's own migrations, to its head
    finally:
        engine.dispose()
    os.replace(staged, path)
    return path


def flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    """Nested dicts -> {"a.b": value}."""
    if not isinstance(data, dict):
        return {prefix: data}
    out: dict[str, Any] = {}
    for key, value in data.items():
        out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


def _chunks(items: list[Any], size: int) -> Iterable[list[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


# MLflow's settings a sweep changes, unless the user set them. A dead tracking server must
# cost seconds per call, not MLflow's default minutes of retries: the results are on disk,
# and `benchflow sync` uploads what was missed. MLflow's usage telemetry (on by default)
# would fetch its config and post records from threads of the sweep's process while jobs
# time: nothing runs beside a timed job.
MLFLOW_DEFAULTS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "30",
    "MLFLOW_DISABLE_TELEMETRY": "true",
}


# SQLite lets one writer at a time and MLflow gives up on its lock after 20 s; jobs of a
# parallel launcher log at the same moments, so a call that met the lock (one
# transaction, rolled back) is tried again.
LOCK_RETRY_S = 120.0


def _locked_db(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if "database is locked" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


class RetryingClient:
    """MlflowClient whose calls are tried again, with backoff, while SQLite is locked."""

    def __init__(self, client: Any, budget_s: float = LOCK_RETRY_S) -> None:
        self._client = client
        self._budget_s = budget_s
        self.lock_retries = 0  # calls that met a locked database (for tests and logs)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            import random
            import time

            deadline = time.monotonic() + self._budget_s
            delay = 0.05
            while True:
                try:
                    return attr(*args, **kwargs)
                except Exception as exc:
                    if not _locked_db(exc) or time.monotonic() > deadline:
                        raise
                    self.lock_retries += 1
                    log.info("MLflow %s: database is locked; trying again", name)
                    time.sleep(delay * (1 + random.random()))
                    delay = min(delay * 2, 2.0)

        return call


class Tracker:
    """An MLflow tracking store and one experiment in it."""

    def __init__(self, cfg: MlflowConfig, project_dir: Path) -> None:
        import os

        for key, value in MLFLOW_DEFAULTS.items():
            os.environ.setdefault(key, value)  # the user's own settings win
        from mlflow.tracking import MlflowClient

        self.uri = cfg.tracking_uri or default_tracking_uri(project_dir)
        seed_sqlite_store(self.uri)
        self.client = RetryingClient(MlflowClient(tracking_uri=self.uri))
        exp = self.client.get_experiment_by_name(cfg.experiment)
        if exp is not None:
            self.experiment_id = exp.experiment_id
            return
        artifacts = None
        if self.uri.startswith("sqlite:"):  # embedded store: artifacts beside the db
            artifacts = (project_dir / "mlartifacts").resolve().as_uri()
        try:
            self.experiment_id = self.client.create_experiment(
                cfg.experiment, artifact_location=artifacts
            )
        except Exception:
            # Another worker created it in between.
            exp = self.client.get_experiment_by_name(cfg.experiment)
            if exp is None:
                raise
            self.experiment_id = exp.experiment_id

    def start_run(
        self,
        name: str,
        *,
        parent_id: str | None = None,
        params: dict[str, Any] | None = None,
        tags: dict[str, Any] | None = None,
    ) -> str:
        all_tags = {k: str(v) for k, v in (tags or {}).items() if v is not None}
        if parent_id:
            all_tags[PARENT_TAG] = parent_id
        run = self.client.create_run(self.experiment_id, run_name=name, tags=all_tags)
        run_id: str = run.info.run_id
        if params:
            self.log_batch(run_id, params=params)
        return run_id

    def set_tags(self, run_id: str, tags: dict[str, Any]) -> None:
        self.log_batch(run_id, tags=tags)

    def log_batch(
        self,
        run_id: str,
        *,
        metrics: dict[str, float] | None = None,
        series: dict[str, list[float]] | None = None,
        params: dict[str, Any] | None = None,
        tags: dict[str, Any] | None = None,
        last_tags: dict[str, Any] | None = None,
    ) -> None:
        """Metrics (a series as its metric's history, the repeat as the step), params and
        tags, in as few log_batch calls as MLflow's limits allow; `last_tags` go last."""
        import itertools
        import time

        from mlflow.entities import Metric, Param, RunTag

        now = int(time.time() * 1000)
        items = [Metric(k, float(v), now, 0) for k, v in (metrics or {}).items()]
        for name, values in (series or {}).items():
            items += [Metric(name, float(v), now, i) for i, v in enumerate(values)]
        kept = [Param(k, str(v)[:6000]) for k, v in (params or {}).items()]

        def run_tags(values: dict[str, Any] | None) -> list[Any]:
            return [RunTag(k, str(v)[:8000]) for k, v in (values or {}).items() if v is not None]

        marks = run_tags(tags)
        # Per call, MLflow takes 1,000 metrics, 100 params, 100 tags, 1,000 in all.
        calls: list[tuple[list[Any], list[Any], list[Any]]] = list(
            itertools.zip_longest(
                _chunks(items, 800), _chunks(kept, 100), _chunks(marks, 100), fillvalue=[]
            )
        )
        last = run_tags(last_tags)
        if last and calls and len(calls[-1][2]) + len(last) <= 100:
            m, p, t = calls.pop()
            calls.append((m, p, [*t, *last]))
        elif last:
            calls.append(([], [], last))
        for m, p, t in calls:
            self.client.log_batch(run_id, metrics=m, params=p, tags=t, synchronous=True)

    def log_tree(self, run_id: str, files: dict[str, Path]) -> None:
        """{artifact path: local file} in one upload: linked into one folder, logged whole."""
        import os
        import shutil

        if not files:
            return
        first = next(iter(files.values()))
        with tempfile.TemporaryDirectory(prefix=".artifacts-", dir=first.parent) as tmp:
            for name, path in files.items():
                target = Path(tmp) / name
                target.parent.mkdir(parents=True, exist_ok=True)
                try:
                    os.link(path, target)
                except OSError:
                    shutil.copy2(path, target)
            self.client.log_artifacts(run_id, tmp)

    def log_files(
        self, run_id: str, files: Iterable[Path], artifact_path: str | None = None
    ) -> None:
        for path in files:
            if path.is_file():
                self.client.log_artifact(run_id, str(path), artifact_path)

    def supersede(self, old_run_id: str, new_run_id: str) -> None:
        """A rerun replaced this job's run: tag it and move it to MLflow's deleted state
        (restorable; the UI lists it under State: Deleted), so one run per job is current."""
        self.client.set_tag(old_run_id, "benchflow.superseded_by", new_run_id)
        self.client.delete_run(old_run_id)

    def reopen(self, run_id: str) -> bool:
        """A resumed sweep goes on in its parent run."""
        self.client.update_run(run_id, status="RUNNING")
        return True

    def end_run(self, run_id: str, status: str) -> None:
        self.client.set_terminated(run_id, status=status_of(status).mlflow_run_status)


SEARCH_PAGE = 1000  # runs a search asks for at a time (MLflow's own default page)


def search_all(client: Any, experiment_id: str, filter_string: str = "") -> list[Any]:
    """Every run of an experiment that the filter matches, page by page (one search
    returns at most 50,000 runs, and the rest silently not)."""
    runs: list[Any] = []
    token = None
    while True:
        page = client.search_runs(
            [experiment_id], filter_string, max_results=SEARCH_PAGE, page_token=token
        )
        runs += page
        token = page.token
        if not token:
            return runs


def run_artifact(client: Any, run: Any, name: str, tmp: str) -> Path:
    """A run's artifact `name`: where it lies when the store's artifacts are local files,
    else downloaded into `tmp` (a download asks the store for the run again, per run)."""
    from mlflow.utils.file_utils import local_file_uri_to_path

    uri = run.info.artifact_uri or ""
    if uri.startswith("file:") or (uri and "://" not in uri):
        here = Path(local_file_uri_to_path(uri)) / name
        if here.is_file():
            return here
    return Path(client.download_artifacts(run.info.run_id, name, tmp))


def job_runs(client: Any, run: Any) -> tuple[list[Any], bool]:
    """(the job runs a run id stands for, whether it is a sweep's parent run): its
    child runs, oldest first, or the run itself when it has none."""
    children = search_all(
        client,
        run.info.experiment_id,
        f"tags.`{PARENT_TAG}` = '{run.info.run_id}'",
    )
    if not children:
        return [run], False
    return sorted(children, key=lambda r: r.info.start_time), True


def safely(what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Run a tracking call; on failure warn and go on (results are on disk)."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:  # any store/network failure
        log.warning("MLflow %s failed, results stay on disk: %s: %s", what, type(exc).__name__, exc)
        return None
