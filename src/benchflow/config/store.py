"""Where benchflow's config lives, the user's config folders, and the schema's registration.

benchflow's tree is `conf/` in a checkout, `benchflow/conf` in a wheel. The user's
folders (`--config-dir DIR`, `hydra.searchpath`) join its groups; Hydra searches
benchflow's first, so a user option named like one of benchflow's would be ignored
without a word: the CLI refuses those.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from hydra.core.config_store import ConfigStore

from benchflow.config.schema import BenchConfig


def _conf_dir() -> Path:
    here = Path(__file__).resolve()
    packaged = here.parents[1] / "conf"  # an installed wheel: benchflow/conf
    return packaged if packaged.is_dir() else here.parents[3] / "conf"  # a checkout


CONF_DIR = _conf_dir()


def user_config_dirs(argv: Sequence[str]) -> list[Path]:
    """The folders a command line adds to Hydra's search path, in its order:
    `--config-dir DIR`, `--config-dir=DIR`, `-cd DIR` and `hydra.searchpath=[file://DIR,...]`."""
    dirs: list[Path] = []
    args = list(argv)
    for i, arg in enumerate(args):
        if arg in ("--config-dir", "-cd") and i + 1 < len(args):
            dirs.append(Path(args[i + 1]))
        elif arg.startswith("--config-dir="):
            dirs.append(Path(arg.split("=", 1)[1]))
        elif arg.startswith("hydra.searchpath="):
            for item in arg.split("=", 1)[1].strip("[]").split(","):
                item = item.strip().strip("'\"")
                if item.startswith("file://"):
                    dirs.append(Path(item.removeprefix("file://")))
    return [d.expanduser().resolve() for d in dirs]


def config_dirs(argv: Sequence[str] = ()) -> list[Path]:
    """benchflow's tree, then the user's folders: Hydra's order of search."""
    return [CONF_DIR, *user_config_dirs(argv)]


def options(group: str, argv: Sequence[str] = ()) -> dict[str, Path]:
    """Every YAML option of a group, by name, from benchflow's tree and the user's
    folders; where two have one name, the one Hydra picks (the first searched)."""
    found: dict[str, Path] = {}
    for folder in config_dirs(argv):
        for path in sorted((folder / group).glob("*.yaml")):
            found.setdefault(path.stem, path)
    return found


def groups(argv: Sequence[str] = ()) -> list[str]:
    """The config groups (folders) of every searched tree, Hydra's own left out."""
    names = {
        p.name
        for folder in config_dirs(argv)
        if folder.is_dir()
        for p in folder.iterdir()
        if p.is_dir() and p.name != "hydra"
    }
    return sorted(names)


def problem(argv: Sequence[str]) -> str | None:
    """What is wrong with the user's config folders, or None: a folder that does not
    exist, or an option named like one of benchflow's (Hydra would pick benchflow's)."""
    for folder in user_config_dirs(argv):
        if not folder.is_dir():
            return (
                f"config folder {folder} (--config-dir / hydra.searchpath) does not exist; "
                "allowed: a folder of YAML options such as model/NAME.yaml"
            )
        for path in sorted(folder.glob("*/*.yaml")):
            group, name = path.parent.name, path.stem
            ours = CONF_DIR / group / path.name
            if group != "hydra" and ours.is_file():
                return (
                    f"{path}: {group}={name} is already benchflow's ({ours}), and Hydra would "
                    f"choose benchflow's; allowed: another name, or override its keys "
                    f"({group}.KEY=VALUE, or an experiment file)"
                )
    return None


def register(models: Iterable[str] = (), source: str = "torchbench") -> None:
    """The schema, plus a `model` option with model.source=`source` for each of `models`
    without a YAML file (TorchBench's, or a suite's)."""
    cs = ConfigStore.instance()
    cs.store(name="benchflow_schema", node=BenchConfig)
    own = {p.stem for p in (CONF_DIR / "model").glob("*.yaml")}
    for name in models:
        if name not in own:
            cs.store(group="model", name=name, node={"name": name, "source": source})
