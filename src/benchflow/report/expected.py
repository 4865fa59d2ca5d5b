"""The expected-results file (docs/expected.md): per model, test and configuration, the
facts of what ran that do not move with the host's speed (the accuracy status and the
signals of results/signals.py), as a CSV kept in the user's repository and reviewed as
a diff, as PyTorch keeps benchmarks/dynamo/ci_expected_accuracy. `lines` makes it from a
sweep's rows, `check` compares a sweep's with it: what got worse, what got better.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchflow.core.status import Status
from benchflow.report.model import build_report
from benchflow.results.row import ResultRow
from benchflow.results.signals import COUNTS, Break, Recompile, short_frame

KEY = ("suite", "model", "test", "configuration")
ACCURACY = "accuracy"
PASS = "PASS"  # the accuracy check passed (harness/verify.py's code)
NOT_CHECKED = "VERIFIER_SKIPPED"  # no accuracy check ran (verify=false, a timed sweep)
# The counts a change of is judged, more being worse: the signals' counts less Inductor's
# kernels, which change with every fusion for better or worse.
JUDGED = tuple(c for c in COUNTS if c != "inductor_kernels")
REASONS, GUARDS = "break_reasons", "recompile_guards"
COLUMNS = (*KEY, ACCURACY, *JUDGED, REASONS, GUARDS)
SEPARATOR = " | "  # between a line's reasons (or guards)
# An object's address in a reason (`<function f at 0x7f...>`): another in every process.
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
# An installed package's file in a reason (`in file `/…/.venv/lib/python3.11/site-packages/
# torch/_dynamo/testing.py``): named from its package on, the same in every environment.
_INSTALLED = re.compile(r"(?<![^\s`'\"(])/[^\s`'\"]*?/(?:site|dist)-packages/")


def _stable(text: str) -> str:
    """A reason or a guard as the file keeps it: the same from any process and environment."""
    return _ADDRESS.sub("0x…", _INSTALLED.sub("", text))


class ExpectedError(ValueError):
    """A file or a sweep that cannot be checked; the message says what to pass instead."""


@dataclass(frozen=True)
class Line:
    """One model, test and configuration: its accuracy and signals, as the file writes them
    ("" where a count does not apply: no dynamo, no XLA)."""

    key: tuple[str, str, str, str]
    values: dict[str, str]  # ACCURACY and JUDGED
    reasons: tuple[str, ...] = ()  # its graph breaks' reasons, sorted
    guards: tuple[str, ...] = ()  # its recompiles' failed guards, sorted
    # the row's own breaks and recompiles, where a sweep's (their places: the output's)
    breaks: tuple[Break, ...] = field(default=(), compare=False)
    recompiles: tuple[Recompile, ...] = field(default=(), compare=False)
    detail: str = field(default="", compare=False)  # a sweep's: why its accuracy is what it is

    @property
    def name(self) -> str:
        """model test configuration, as the output names a line."""
        _, model, test, configuration = self.key
        return f"{model} {test} {configuration}"

    def cells(self) -> list[str]:
        return [
            *self.key,
            *(self.values[c] for c in (ACCURACY, *JUDGED)),
            SEPARATOR.join(self.reasons),
            SEPARATOR.join(self.guards),
        ]


def _count(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


def _accuracy(row: ResultRow) -> str:
    """The accuracy check's code where the job ran ok, else how it ended."""
    return row.verification_code if row.status is Status.OK else row.status.value


def lines(rows: Sequence[ResultRow]) -> list[Line]:
    """A sweep's lines, sorted: one per model, test and configuration as its report names
    them (a later row of the same wins; invalid combinations are none)."""
    out = []
    for e in build_report(rows).entries:
        signals = e.row.signals
        values = {ACCURACY: _accuracy(e.row)}
        values |= {c: _count(getattr(signals, c) if signals else None) for c in JUDGED}
        breaks = tuple(signals.breaks) if signals else ()
        recompiles = tuple(signals.guards) if signals else ()
        out.append(
            Line(
                (e.row.model.suite_name, e.model, e.test, e.config.label),
                values,
                tuple(sorted({_stable(b.reason) for b in breaks})),
                tuple(sorted({_stable(g.guard) for g in recompiles})),
                breaks,
                recompiles,
                e.row.verification_detail or (e.row.error or "").partition("\n")[0],
            )
        )
    return sorted(out, key=lambda line: line.key)


def to_csv(found: Sequence[Line]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    writer.writerows(line.cells() for line in found)
    return out.getvalue()


WRITTEN_BY = "`benchflow expected SWEEP FILE --update`"


def read(path: Path) -> list[Line]:
    """A file's lines (ExpectedError: missing, or not one this module wrote)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ExpectedError(
            f"{path}: no such file; allowed: a file {WRITTEN_BY} wrote (--update writes it)"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ExpectedError(f"{path}: cannot be read ({exc}); allowed: a text file") from None
    table = list(csv.reader(io.StringIO(text)))
    if not table or tuple(table[0]) != COLUMNS:
        head = ",".join(table[0])[:80] if table else "(empty)"
        raise ExpectedError(
            f"{path}: not an expected-results file (its first line is {head!r}); allowed: "
            f"a file {WRITTEN_BY} wrote, whose first line is {','.join(COLUMNS)}"
        )
    out = []
    for number, cells in enumerate(table[1:], start=2):
        if len(cells) != len(COLUMNS):
            raise ExpectedError(
                f"{path}, line {number}: {len(cells)} fields; allowed: {len(COLUMNS)} "
                f"({','.join(COLUMNS)})"
            )
        got = dict(zip(COLUMNS, cells, strict=True))
        for name in JUDGED:
            if got[name] and _number(got[name]) is None:
                raise ExpectedError(
                    f"{path}, line {number}: {name}={got[name]!r} is not a number; "
                    "allowed: a number, or empty where it does not apply"
                )
        out.append(
            Line(
                (got["suite"], got["model"], got["test"], got["configuration"]),
                {c: got[c] for c in (ACCURACY, *JUDGED)},
                tuple(r for r in got[REASONS].split(SEPARATOR) if r),
                tuple(g for g in got[GUARDS].split(SEPARATOR) if g),
            )
        )
    return out


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


# How a change is judged
WORSE, BETTER, OTHER = "worse", "better", "changed"


@dataclass(frozen=True)
class Change:
    key: tuple[str, str, str, str]  # the line's (Line.key)
    line: str  # its name (Line.name)
    field: str  # the column, as words: "graph breaks"
    old: str
    new: str
    kind: str  # WORSE, BETTER or OTHER
    why: str = ""  # a worse one's cause: new breaks' reasons, guards, an accuracy's detail

    def __str__(self) -> str:
        old, new = self.old or "-", self.new or "-"
        why = f" ({self.why})" if self.why else ""
        return f"{self.line}: {self.field} {old} → {new}{why}"


def words(column: str) -> str:
    return column.replace("_", " ")


@dataclass
class Checked:
    """A sweep's lines against a file's."""

    changes: list[Change]
    only_in_file: list[str]  # lines' names
    only_in_sweep: list[str]

    def of(self, kind: str) -> list[Change]:
        return [c for c in self.changes if c.kind == kind]

    @property
    def worse(self) -> bool:
        return bool(self.of(WORSE))

    @property
    def same(self) -> bool:
        return not (self.changes or self.only_in_file or self.only_in_sweep)


def check(expected: Sequence[Line], got: Sequence[Line], file: str = "the file") -> Checked:
    """Each line's changes from the file's (`expected`) to the sweep's (`got`); the
    lines of one side only. Refused (ExpectedError) when they share no suite."""
    suites = {line.key[0] for line in expected}, {line.key[0] for line in got}
    if expected and not suites[0] & suites[1]:
        raise ExpectedError(
            f"{file} holds suite {', '.join(sorted(suites[0]))}, the sweep's rows suite "
            f"{', '.join(sorted(suites[1]))}; allowed: the file written from a sweep of the "
            "same suite (one file per suite)"
        )
    before = {line.key: line for line in expected}
    now = {line.key: line for line in got}
    both = sorted(before.keys() & now.keys())
    return Checked(
        [c for key in both for c in _changes(before[key], now[key])],
        [before[k].name for k in sorted(before.keys() - now.keys())],
        [now[k].name for k in sorted(now.keys() - before.keys())],
    )


def _changes(old: Line, new: Line) -> list[Change]:
    """A line's changes: its accuracy (a pass that no longer passes is worse, one that no
    longer ran its check only changed), each count (more is worse), then its reasons and
    guards where their counts did not change."""
    out = []

    def add(name: str, a: str, b: str, kind: str, why: str = "") -> None:
        out.append(Change(new.key, new.name, words(name), a, b, kind, why))

    a, b = old.values[ACCURACY], new.values[ACCURACY]
    if a != b:
        kind = WORSE if a == PASS and b != NOT_CHECKED else BETTER if b == PASS else OTHER
        add(ACCURACY, a, b, kind, new.detail if kind == WORSE else "")
    for name in JUDGED:
        a, b = old.values[name], new.values[name]
        if a != b:
            x, y = _number(a), _number(b)
            kind = OTHER if x is None or y is None else WORSE if y > x else BETTER
            add(name, a, b, kind, _why(name, old, new, kind))
    judged = {c.field for c in out}
    if old.reasons != new.reasons and words("graph_breaks") not in judged:
        add(REASONS, _listed(old.reasons), _listed(new.reasons), OTHER)
    if old.guards != new.guards and words("recompiles") not in judged:
        add(GUARDS, _listed(old.guards), _listed(new.guards), OTHER)
    return out


def _listed(items: Sequence[str]) -> str:
    return SEPARATOR.join(items) or "none"


def _why(name: str, old: Line, new: Line, kind: str) -> str:
    """A worse count's cause: its new breaks' reasons or guards, each with its place."""
    if kind != WORSE:
        return ""
    if name == "graph_breaks":
        found = [(b.reason, b.frame) for b in new.breaks]
        known = set(old.reasons)
    elif name == "recompiles":
        found = [(g.guard, g.frame) for g in new.recompiles]
        known = set(old.guards)
    else:
        return ""
    fresh = [(r, f) for r, f in found if _ADDRESS.sub("0x…", r) not in known] or found
    return "; ".join(f"at {short_frame(frame)}: {reason}" for reason, frame in fresh)
