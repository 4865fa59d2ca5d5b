"""What every benchmark script does with its figures: print them, and append them to
the file `--out` names as a section of its own (benchmarks/RESULTS.md's form)."""

from __future__ import annotations

from pathlib import Path


def publish(text: str, out: Path | None) -> None:
    print(text)
    if out:
        with out.open("a") as f:
            f.write("\n" + text.strip("\n") + "\n")
