"""A user-supplied reward: `fn(prompt: str, completion: str, row: dict) -> float`, named in the
config as "module:function" and imported and called inside the sandbox, like sampled code.

The module's source is read (and compiled, to report syntax errors early) at construction; in
the sandbox it runs as module `module`, with the search path and the trainer's site-packages on
`sys.path`, so it may import sibling modules and installed packages (raise `memory_mb` for heavy
ones). Where the sandbox runs as `nobody`, siblings import only if `nobody` may read the search
path directory itself (its parents need not be readable: see sandbox.py). An exception, a
timeout, or a return value that is not a finite real number scores 0.0 and logs the reason.
"""

from __future__ import annotations

import json
import logging
import math
import re
import sysconfig
from pathlib import Path
from typing import Any

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

_FUNCTION_REF = re.compile(r"([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*):([A-Za-z_]\w*)")

# Runs in the sandbox; everything it needs arrives on stdin as JSON.
_HARNESS = """\
import json
import os
import sys
import types


def _main():
    payload = json.loads(sys.stdin.read())
    write, dumps, marker = os.write, json.dumps, payload["marker"]
    result_fd = os.dup(1)
    os.dup2(2, 1)  # the function's prints go to stderr; stdout carries only the result line
    try:
        module = types.ModuleType(payload["module"])
        module.__file__ = payload["file"]
        module.__package__ = payload["module"].rpartition(".")[0]
        sys.modules[payload["module"]] = module
        exec(compile(payload["source"], payload["file"], "exec"), module.__dict__)
        fn = getattr(module, payload["function"])
        value = fn(payload["prompt"], payload["completion"], payload["row"])
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            result = {"error": "returned " + type(value).__name__ + ", not a float"}
        else:
            result = {"reward": float(value)}
    except BaseException as exc:
        result = {"error": (type(exc).__name__ + ": " + str(exc))[:500]}
    write(result_fd, (marker + " " + dumps(result) + "\\n").encode())
    os._exit(0)


_main()
"""


class PythonFunctionReward:
    """Scores each completion with a user function run in the sandbox."""

    def __init__(
        self,
        function: str,
        timeout_s: float = 10.0,
        cpu_s: float = 5.0,
        memory_mb: int = 512,
        search_path: Path | None = None,
    ) -> None:
        check_limits(timeout_s, cpu_s, memory_mb)
        match = _FUNCTION_REF.fullmatch(function.strip())
        if match is None:
            raise ConfigError(
                f"reward function {function!r} must have the form 'module:function', "
                "e.g. 'my_rewards:score' for score() in my_rewards.py"
            )
        self.function_ref = function.strip()
        self.module, self.function = match.groups()
        root = (search_path or Path.cwd()).resolve()
        self.file = _module_file(root, self.module)
        self.source = self.file.read_text(encoding="utf-8")
        try:
            compile(self.source, str(self.file), "exec")
        except SyntaxError as exc:
            raise ConfigError(f"reward module {self.file} does not compile: {exc}") from exc
        self.sys_path = [str(root), *_site_packages()]
        self.timeout_s, self.cpu_s, self.memory_mb = timeout_s, cpu_s, memory_mb

    def __call__(self, problem: Problem, completions: list[Completion]) -> list[float]:
        prompt = _prompt_text(problem)
        return map_concurrently(lambda c: self.score(prompt, c.text, problem.row), completions)

    def score(self, prompt: str, completion: str, row: dict[str, Any]) -> float:
        """Call the function once in a fresh sandboxed process; 0.0 if it fails."""
        marker = result_marker()
        payload = {
            "marker": marker,
            "module": self.module,
            "file": str(self.file),
            "source": self.source,
            "function": self.function,
            "prompt": prompt,
            "completion": completion,
            "row": row,
        }
        result = run_sandboxed(
            _HARNESS,
            timeout_s=self.timeout_s,
            cpu_s=self.cpu_s,
            memory_mb=self.memory_mb,
            stdin=json.dumps(payload, default=str),
            extra_sys_path=self.sys_path,
        )
        line = read_result(result.stdout, marker) or {}
        reward = line.get("reward")
        if not result.timed_out and isinstance(reward, float) and math.isfinite(reward):
            return reward
        reason = (
            result.killed_reason
            or line.get("error")
            or (f"returned {reward}" if reward is not None else None)
            or f"no result (exit code {result.returncode}): {result.stderr[-300:]}"
        )
        logger.warning("reward %s scored 0.0: %s", self.function_ref, reason)
        return 0.0


def _module_file(root: Path, module: str) -> Path:
    relative = Path(*module.split("."))
    candidates = [root / relative.with_suffix(".py"), root / relative / "__init__.py"]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise ConfigError(
        f"reward module {module!r} not found: no {candidates[0]} or {candidates[1]} "
        f"(the search path is the config file's directory, else the working directory)"
    )


def _site_packages() -> list[str]:
    paths = sysconfig.get_paths()
    return list(dict.fromkeys([paths["purelib"], paths["platlib"]]))


def _prompt_text(problem: Problem) -> str:
    """The last user message: the prompt of a single-turn problem."""
    users = [m["content"] for m in problem.messages if m["role"] == "user"]
    return users[-1] if users else ""
