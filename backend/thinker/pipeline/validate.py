"""The validate stage: the configured pytest suite, then the dataset schema check.

The suite runs in a subprocess, `python -m pytest <path> [-m <markers>] <args>`, with its
output streamed line by line as it comes. A subprocess rather than `pytest.main()` in this
process: pytest imports the suite's modules and conftest files into `sys.modules`, registers
plugins and may change the working directory or global state, none of which can be undone
before training starts in the same process; a child process also gives the suite a clean
interpreter, as CI would, and an exit code that cannot be confused with ours.

The dataset check reads `data_validation.path` as its `kind` says. Without a
`data_validation` section, every dataset the pipeline will read (each stage's training and
held-out sets, the evaluation set) is checked as the algorithm that reads it will read it:
chat or prompt/completion rows for SL, preference pairs for DPO, problems for RL (with the
field its reward scores against: `answer` for exact_match, `tests` for code). A row that
training would refuse, or that the reward could not score, is an error with its line
number before anything trains, not a crash at step 7.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TextIO

from thinker.algorithms.dpo_config import DPOConfig
from thinker.algorithms.reward_model_config import RewardModelConfig
from thinker.algorithms.rl_config import RLConfig
from thinker.algorithms.rlhf import RLHFConfig
from thinker.algorithms.sl_config import SLConfig
from thinker.data import SchemaField, ValidationResult, schema_for_kind, validate_jsonl
from thinker.data.preferences import check_pair as preference_row_errors
from thinker.data.validation import RowError, check_row, scan_rows
from thinker.pipeline.config import DataValidationConfig, PipelineConfig, TestsConfig

PYTEST_NO_TESTS_COLLECTED = 5
RowCheck = Callable[[int, dict[str, object]], list[RowError]]
SL_ROWS = "chat or prompt/completion rows"

# The fields of an RL problem row, as `thinker.data.problems.load_problems` reads them.
_PROBLEM_FIELDS = [
    SchemaField("prompt", "string", required=False),
    SchemaField("messages", "array", required=False),
    SchemaField("answer", "string", required=False, allow_empty=True),
    SchemaField("tests", "array", required=False),
]
_ROLE_CONTENT = ("role", "content")
# What a problem row needs for a reward to score it: (any of these fields, why).
_ANY_TARGET = (("answer", "tests"), "a reward needs 'answer' or 'tests' to score the row")
_REWARD_TARGETS: dict[str, tuple[tuple[str, ...], str]] = {
    "exact_match": (("answer",), "the exact_match reward compares completions with it"),
    "code": (("tests",), "the code reward runs completions against them"),
}


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
    kind: str = ""  # what the rows were checked as, in words

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
    """The configured file, checked as its `kind` says, with `schema` on top."""
    schema = None
    if spec.fields is not None:
        schema = [SchemaField(f.name, f.type, f.required, f.allow_empty) for f in spec.fields]
    if spec.kind in ("preferences", "problems"):
        check, kind = (
            (preference_row_errors, "preference pairs")
            if spec.kind == "preferences"
            else (problem_row_check(*_ANY_TARGET), "RL problems")
        )
        return scan(spec.path, check, kind, schema, spec.max_examples)
    result: ValidationResult = validate_jsonl(
        spec.path, schema=schema, kind=spec.kind, max_examples=spec.max_examples
    )
    errors = [e.format(result.path) for e in result.errors]
    return DatasetCheck(result.path, result.rows_checked, errors, spec.kind or "")


def check_loadable(path: Path) -> DatasetCheck:
    """Check every row as SL will read it: chat or prompt/completion, mixed freely."""
    return scan(path, sl_row_errors, SL_ROWS)


def sl_row_errors(line: int, row: dict[str, object]) -> list[RowError]:
    """A chat row or a prompt/completion row, as SL reads it."""
    kind = "chat" if "messages" in row else "prompt_completion"
    return check_row(line, row, schema_for_kind(kind), kind)


def problem_row_check(targets: tuple[str, ...], why: str) -> RowCheck:
    """The check of an RL problem row: what `load_problems` refuses, and a row with none of
    `targets` (the fields the reward scores against; `why` says so)."""

    def check(line: int, row: dict[str, object]) -> list[RowError]:
        answer = row.get("answer")
        if isinstance(answer, int | float) and not isinstance(answer, bool):
            row = {**row, "answer": str(answer)}  # numbers are read as text
        errors = check_row(line, row, _PROBLEM_FIELDS)
        if ("prompt" in row) == ("messages" in row):
            kind = "missing" if "prompt" not in row else "invalid_value"
            errors.append(
                RowError(line, "prompt", "give exactly one of 'prompt' or 'messages'", kind)
            )
        messages = row.get("messages")
        for i, m in enumerate(messages if isinstance(messages, list) else []):
            if not (isinstance(m, dict) and all(isinstance(m.get(k), str) for k in _ROLE_CONTENT)):
                message = "expected an object with string 'role' and 'content'"
                errors.append(RowError(line, f"messages[{i}]", message, "wrong_type"))
        if targets and all(row.get(t) is None for t in targets):
            errors.append(RowError(line, " or ".join(targets), f"missing ({why})", "missing"))
        return errors

    return check


def dataset_reads(
    section: SLConfig | DPOConfig | RewardModelConfig | RLConfig | RLHFConfig,
) -> list[tuple[Path, RowCheck, str]]:
    """Each dataset a training section reads, how its algorithm reads a row of it, and what
    it reads the rows as (in words). RLHF's are those of its three stages."""
    if isinstance(section, RLHFConfig):
        return [r for part in (section.sl, section.rm, section.rl) for r in dataset_reads(part)]
    if isinstance(section, DPOConfig | RewardModelConfig):
        check, kind = preference_row_errors, "preference pairs"
    elif isinstance(section, RLConfig):
        targets, why = _REWARD_TARGETS.get(section.reward.type, ((), ""))
        check, kind = problem_row_check(targets, why), f"RL problems ({section.reward.type} reward)"
    else:
        check, kind = sl_row_errors, SL_ROWS
    return [(p, check, kind) for p in (section.dataset, section.eval_dataset) if p is not None]


def scan(
    path: Path,
    check: RowCheck,
    kind: str,
    schema: list[SchemaField] | None = None,
    max_examples: int | None = None,
) -> DatasetCheck:
    """`check` and the `schema` fields on every row of `path`; every problem found."""

    def both(line: int, row: dict[str, object]) -> list[RowError]:
        return check(line, row) + (check_row(line, row, schema) if schema else [])

    result = scan_rows(path, both, max_examples)
    return DatasetCheck(path, result.rows_checked, [e.format(path) for e in result.errors], kind)


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
        checks = _pipeline_checks(config)
        max_errors = 20
    for check in checks:
        _print_check(check, max_errors, out, err)
    return ValidationReport(tests, checks)


def _pipeline_checks(config: PipelineConfig) -> list[DatasetCheck]:
    """Every dataset the pipeline reads, checked once per way it is read."""
    reads: dict[tuple[Path, str], RowCheck] = {}
    for section in config.sections:
        for path, check, kind in dataset_reads(section):
            reads.setdefault((path, kind), check)
    if config.evaluation.dataset is not None:  # generation eval reads SL rows
        reads.setdefault((config.evaluation.dataset, SL_ROWS), sl_row_errors)
    return [scan(path, check, kind) for (path, kind), check in reads.items()]


def _print_check(check: DatasetCheck, max_errors: int, out: TextIO, err: TextIO) -> None:
    what = f" as {check.kind}" if check.kind else ""
    if check.ok:
        print(f"[thinker] validate: {check.path}: {check.rows_checked} rows OK{what}", file=out)
        return
    print(f"[thinker] validate: {check.path}{what}: {len(check.errors)} problem(s):", file=err)
    for line in check.errors[:max_errors]:
        print(f"  {line}", file=err)
    if len(check.errors) > max_errors:
        print(f"  ... and {len(check.errors) - max_errors} more not shown", file=err)
    err.flush()
