"""Commands beside the sweep (`benchflow <command>`), each a module with main(argv).

The top layer: a command may import any stage; no stage imports a command.
"""

# `benchflow <name> ...`: each command's module and what it does (--help lists them).
COMMANDS = {
    "models": ("benchflow.cli.models", "which models can run on this machine"),
    "report": ("benchflow.cli.report", "tables, plots and the regression gate (--compare BASE)"),
    "expected": ("benchflow.cli.expected", "accuracy and graph breaks against a file (--update)"),
    "ui": ("benchflow.cli.ui", "the MLflow UI over the runs' store, on 127.0.0.1:5000"),
    "sync": ("benchflow.cli.sync", "upload to MLflow what a sweep could not log"),
    "rerun": ("benchflow.cli.rerun", "run recorded jobs again, from their records"),
    "history": ("benchflow.cli.history", "the same jobs over many sweeps: change points"),
    "bisect": ("benchflow.cli.bisect", "the first release between two toolchains that regressed"),
}
