"""The validate stage: the configured pytest suite, then the dataset schema check.

The suite runs in a subprocess, `python -m pytest <path> [-m <markers>] <args>`, with its
output streamed line by line as it comes. A subprocess rather than `pytest.main()` in this
process: pytest imports the suite's modules and conftest files into `sys.modules`, registers
plugins and may change the working directory or global state, none of which can be undone
before training starts in the same process; a child process also gives the suite a clean
interpreter, as CI would, and an exit code that cannot be confused with ours.

The dataset check is `thinker.data.validate_jsonl` on `data_validation.path`. Without a
`data_validation` section, every dataset the pipeline will read (training, evaluation) is
checked by loading it exactly as training will.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TextIO

from thinker.data import SchemaField, ValidationResult, schema_for_kind, validate_jsonl
from thinker.data.validation import RowError, check_row, iter_rows
from thinker.pipeline.config import DataValidationConfig, PipelineConfig, TestsConfig

PYTEST_NO_TESTS_COLLECTED = 5


@dataclass(frozen=True)
class TestSuiteResult:
    """How the pytest suite ended."""

    __test__ = False  # not a pytest test class

    status: Literal["passed", "failed", "disabled"]
    exit_code: int | None
    command: list[str] = field(default_factory=list)
    reason: str | None = None  # why it failed, in words


@dataclass(frozen=True)
class DatasetCheck:
    """The dataset check of one file: rows read and every problem found."""

    path: Path
    rows_checked: int
    errors: list[str]  # `<file>:<line>: <field>: <what is wrong>`, all of them

    @property
    def ok(self) -> bool:
        return not self.errors


@dataclass(frozen=True)
class ValidationReport:
    """The outcome of the validate stage."""

    tests: TestSuiteResult | None
    datasets: list[DatasetCheck]

    @property
    def ok(self) -> bool:
        tests_ok = self.tests is None or self.tests.status != "failed"
        return tests_ok and all(d.ok for d in self.datasets)

    def failure(self) -> str:
        """One line saying what failed ("" when nothing did)."""
        reasons = []
        if self.tests is not None and self.tests.status == "failed":
            reasons.append(f"test suite failed ({self.tests.reason})")
        bad = [d for d in self.datasets if not d.ok]
        reasons += [f"{len(d.errors)} dataset problem(s) in {d.path}" for d in bad]
        return "; ".join(reasons)

    def metrics(self) -> dict[str, int | str | None]:
        """The figures metadata.json keeps."""
        return {
            "tests": self.tests.status if self.tests else "not configured",
            "tests_exit_code": self.tests.exit_code if self.tests else None,
            "dataset_rows_checked": sum(d.rows_checked for d in self.datasets),
            "dataset_errors": sum(len(d.errors) for d in self.datasets),
        }


def run_test_suite(tests: TestsConfig, cwd: Path, out: TextIO | None = None) -> TestSuiteResult:
    """Run pytest in a subprocess, streaming its output to `out` (default: sys.stdout)."""
    out = out or sys.stdout
    command = [sys.executable, "-m", "pytest", str(tests.path)]
    if tests.markers:
        command += ["-m", tests.markers]
    command += tests.args
    if not tests.enabled:
        return TestSuiteResult("disabled", None, command)
    print(f"[thinker] validate: {' '.join(command[1:])}", file=out, flush=True)
    with subprocess.Popen(
        command,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        errors="replace",
        bufsize=1,
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            out.write(line)
        out.flush()
        code = proc.wait()
    if code == 0:
        return TestSuiteResult("passed", code, command)
    if code == PYTEST_NO_TESTS_COLLECTED:
        reason = "pytest collected no tests; check tests.path and tests.markers"
    else:
        reason = f"pytest exit code {code}"
    return TestSuiteResult("failed", code, command, reason)


def check_dataset(spec: DataValidationConfig) -> DatasetCheck:
    """`validate_jsonl` on the configured file with its kind and schema."""
    schema = None
    if spec.fields is not None:
        schema = [SchemaField(f.name, f.type, f.required, f.allow_empty) for f in spec.fields]
    result: ValidationResult = validate_jsonl(
        spec.path, schema=schema, kind=spec.kind, max_examples=spec.max_examples
    )
    errors = [e.format(result.path) for e in result.errors]
    return DatasetCheck(result.path, result.rows_checked, errors)


def check_loadable(path: Path) -> DatasetCheck:
    """Check every row as training will read it: chat or prompt/completion, mixed freely."""
    result = ValidationResult(path=path, rows_checked=0)
    for line, row in iter_rows(path):
        if isinstance(row, RowError):
            result.errors.append(row)
            continue
        result.rows_checked += 1
        kind = "chat" if "messages" in row else "prompt_completion"
        result.errors.extend(check_row(line, row, schema_for_kind(kind), kind))
    if result.rows_checked == 0 and not result.errors:
        result.errors.append(RowError(0, None, "file has no rows", "no_rows"))
    return DatasetCheck(path, result.rows_checked, [e.format(path) for e in result.errors])


def validate(
    config: PipelineConfig, out: TextIO | None = None, err: TextIO | None = None
) -> ValidationReport:
    """Run the test suite and the dataset check; print the first problems of each file to `err`.

    Both checks always run, so one `thinker validate` reports everything that is wrong.
    `out` and `err` default to sys.stdout and sys.stderr as they are at call time.
    """
    out, err = out or sys.stdout, err or sys.stderr
    cwd = config.source.parent if config.source else Path.cwd()
    tests = run_test_suite(config.tests, cwd, out) if config.tests else None
    if config.data_validation is not None:
        checks = [check_dataset(config.data_validation)]
        max_errors = config.data_validation.max_errors
    else:
        paths = [config.training.dataset, config.training.eval_dataset, config.evaluation.dataset]
        checks = [check_loadable(p) for p in dict.fromkeys(p for p in paths if p is not None)]
        max_errors = 20
    for check in checks:
        _print_check(check, max_errors, out, err)
    return ValidationReport(tests, checks)


def _print_check(check: DatasetCheck, max_errors: int, out: TextIO, err: TextIO) -> None:
    if check.ok:
        print(f"[thinker] validate: {check.path}: {check.rows_checked} rows OK", file=out)
        return
    print(f"[thinker] validate: {check.path}: {len(check.errors)} problem(s):", file=err)
    for line in check.errors[:max_errors]:
        print(f"  {line}", file=err)
    if len(check.errors) > max_errors:
        print(f"  ... and {len(check.errors) - max_errors} more not shown", file=err)
    err.flush()
