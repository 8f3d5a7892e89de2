"""Code execution: run the sampled program against the problem's tests in the sandbox.

reward = fraction of `problem.tests` that pass. All tests of one completion run in one sandboxed
process: a small harness executes the solution (if that raises, every test fails), then each
test separately, catching its exception, and writes `<marker> {"passed": n, "total": m}` to the
real stdout. The marker holds a random nonce and the solution's own stdout goes to stderr, so
printing a result line earns nothing; code that deliberately searches the interpreter's memory
could still find the nonce (the kernel limits hold either way). A timeout, crash or missing
result line scores 0.
"""

from __future__ import annotations

import json
import logging
import re

from thinker.errors import ConfigError
from thinker.rewards.base import Completion, Problem
from thinker.rewards.sandbox import (
    check_limits,
    map_concurrently,
    read_result,
    result_marker,
    run_sandboxed,
)

logger = logging.getLogger(__name__)

_FENCED = re.compile(r"```([^\n`]*)\n(.*?)```", re.DOTALL)
_OPEN_FENCE = re.compile(r"```[^\n`]*\n(.*)", re.DOTALL)  # a block cut short by max_tokens
_PYTHON_TAGS = {"python", "python3", "py"}

# Runs in the sandbox; its input (marker, code, tests) arrives on stdin, read before the code runs.
_HARNESS = """\
import json
import os
import sys
import traceback


def _main():
    payload = json.loads(sys.stdin.read())
    write, dumps, marker, tests = os.write, json.dumps, payload["marker"], payload["tests"]
    result_fd = os.dup(1)
    os.dup2(2, 1)  # the solution's prints go to stderr; stdout carries only the result line
    namespace = {"__name__": "solution"}  # `if __name__ == "__main__":` demos do not run
    try:
        exec(compile(payload["code"], "<solution>", "exec"), namespace)
        ran = True
    except SystemExit as exc:
        ran = exc.code in (None, 0)
    except BaseException:  # a crash (MemoryError included) fails every test
        traceback.print_exc()
        ran = False
    passed = 0
    for test in tests if ran else []:
        try:
            exec(compile(test, "<test>", "exec"), namespace)
            passed += 1
        except BaseException:
            traceback.print_exc(limit=-1)
    line = marker + " " + dumps({"passed": passed, "total": len(tests)}) + "\\n"
    write(result_fd, line.encode())
    os._exit(0)


_main()
"""


def extract_code(text: str) -> str:
    """The last ```python block, else the last ``` block, else an unclosed block, else the text."""
    blocks = _FENCED.findall(text)
    python = [code for tag, code in blocks if tag.strip().lower() in _PYTHON_TAGS]
    if python:
        return python[-1]
    if blocks:
        return blocks[-1][1]
    opened = _OPEN_FENCE.search(text)
    return opened.group(1) if opened else text


class CodeExecutionReward:
    """Fraction of the problem's tests (e.g. `assert f(2) == 4`) that the sampled code passes."""

    def __init__(self, timeout_s: float = 10.0, cpu_s: float = 5.0, memory_mb: int = 512) -> None:
        check_limits(timeout_s, cpu_s, memory_mb)
        self.timeout_s, self.cpu_s, self.memory_mb = timeout_s, cpu_s, memory_mb

    def __call__(self, problem: Problem, completions: list[Completion]) -> list[float]:
        if not problem.tests:
            raise ConfigError("the code reward needs a non-empty 'tests' list in every problem row")
        tests = list(problem.tests)
        return map_concurrently(lambda c: self.score(c.text, tests), completions)

    def score(self, text: str, tests: list[str]) -> float:
        """Run the code in `text` against `tests` in one sandboxed process."""
        marker = result_marker()
        payload = {"marker": marker, "code": extract_code(text), "tests": tests}
        result = run_sandboxed(
            _HARNESS,
            timeout_s=self.timeout_s,
            cpu_s=self.cpu_s,
            memory_mb=self.memory_mb,
            stdin=json.dumps(payload),
        )
        line = read_result(result.stdout, marker)
        passed, total = (line or {}).get("passed"), (line or {}).get("total")
        if result.timed_out or type(passed) is not int or total != len(tests):
            reason = result.killed_reason or f"no result line (exit code {result.returncode})"
            logger.debug("code reward 0: %s", reason)
            return 0.0
        return min(max(passed, 0), len(tests)) / len(tests)
