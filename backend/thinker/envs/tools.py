"""Tools the policy may call, and tool calls read from its messages in the renderer's format.

Formats. Qwen3, the chat-template renderer and the base-model role_colon format use the Hermes
convention Qwen's templates document: each call is a JSON object between `<tool_call>` and
`</tool_call>`, `{"name": ..., "arguments": {...}}`. Llama 3 writes the call as the message's
JSON object `{"name": ..., "parameters": {...}}` (its "JSON based tool calling"), optionally
after `<|python_tag|>`. A message with no call is the final answer; a malformed call
(bad JSON, an unknown tool, missing arguments) raises ToolCallError, which the environment turns
into an observation for the policy rather than a crash.
"""

from __future__ import annotations

import ast
import json
import math
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from thinker.rewards.sandbox import run_sandboxed

_HERMES = re.compile(r"<tool_call>(.*?)(</tool_call>|$)", re.DOTALL)
OUTPUT_CHARS = 2000  # of a tool's output shown to the policy


class ToolCallError(ValueError):
    """A tool call the environment cannot run; its message is shown to the policy."""


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, str]  # argument name -> description
    run: Callable[[dict[str, Any]], str]


def parse_tool_calls(text: str, renderer: str) -> list[ToolCall]:
    """The calls in an assistant message's `text` ([] when it makes none)."""
    if renderer == "llama3":
        body = text.strip().removeprefix("<|python_tag|>").strip()
        if not body.startswith("{"):
            return []
        return [_call(body, "parameters")]
    calls = []
    for match in _HERMES.finditer(text):
        if not match.group(2):
            raise ToolCallError("a <tool_call> was opened and never closed with </tool_call>")
        calls.append(_call(match.group(1).strip(), "arguments"))
    return calls


def _call(body: str, key: str) -> ToolCall:
    try:
        value = json.loads(body)
    except json.JSONDecodeError as e:
        raise ToolCallError(
            f"the tool call is not valid JSON ({e.msg} at character {e.pos})"
        ) from e
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        raise ToolCallError('a tool call is a JSON object with a string "name"')
    arguments = value.get(key, {})
    if not isinstance(arguments, dict):
        raise ToolCallError(f'the tool call\'s "{key}" must be a JSON object')
    return ToolCall(value["name"], arguments)


def run_call(call: ToolCall, tools: dict[str, Tool]) -> str:
    """The tool's output for `call`; ToolCallError for an unknown tool or missing argument."""
    tool = tools.get(call.name)
    if tool is None:
        raise ToolCallError(f"no tool {call.name!r}; the tools are: {', '.join(sorted(tools))}")
    missing = [p for p in tool.parameters if p not in call.arguments]
    if missing:
        raise ToolCallError(f"{call.name} needs the argument(s) {', '.join(missing)}")
    output = tool.run(call.arguments)
    return output if len(output) <= OUTPUT_CHARS else output[:OUTPUT_CHARS] + " [cut]"


def format_instructions(tools: list[Tool], renderer: str) -> str:
    """The system message that offers `tools` and says how to call one, with an example call
    of the first tool (short: every token of it is in every episode's prompt)."""
    listing = "\n".join(f"- {t.name}({', '.join(t.parameters)}): {t.description}" for t in tools)
    first = tools[0]
    example = {p: f"<{p}>" for p in first.parameters}
    if renderer == "llama3":
        call = json.dumps({"name": first.name, "parameters": example})
        how = f"To call a tool, reply with only {call}."
    else:
        call = json.dumps({"name": first.name, "arguments": example})
        how = f"To call a tool, write <tool_call>{call}</tool_call>."
    return (
        f"Tools:\n{listing}\n{how} Its result comes back next. Reply without a call to give "
        "your final answer."
    )


def tool_role(renderer: str) -> str:
    """The role a tool's result is sent as: "tool" where the format has one (Qwen's
    tool_response, Llama's ipython), else a user turn (the base-model format's turns alternate
    User / Assistant)."""
    return "user" if renderer == "role_colon" else "tool"


# ---- the built-in tools ------------------------------------------------------------------
_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}
MAX_EXPONENT = 100
MAX_EXPRESSION = 200  # characters


def calculate(expression: str) -> str:
    """The value of an arithmetic expression (numbers, + - * / // % **, parentheses), as text;
    ToolCallError for anything else."""
    if len(expression) > MAX_EXPRESSION:
        raise ToolCallError(f"the expression is over {MAX_EXPRESSION} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as e:
        raise ToolCallError(f"not an arithmetic expression: {expression!r}") from e
    try:
        value = _evaluate(tree.body)
    except ZeroDivisionError as e:
        raise ToolCallError("division by zero") from e
    if isinstance(value, float) and not math.isfinite(value):
        raise ToolCallError("the result is not a finite number")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def _evaluate(node: ast.expr) -> int | float:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        if isinstance(node.value, bool):
            raise ToolCallError("only numbers, + - * / // % ** and parentheses are allowed")
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise ToolCallError(f"exponents are limited to {MAX_EXPONENT}")
        return _BINARY[type(node.op)](left, right)  # type: ignore[no-any-return]
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))  # type: ignore[no-any-return]
    raise ToolCallError("only numbers, + - * / // % ** and parentheses are allowed")


CALCULATOR = Tool(
    "calculator",
    "Evaluates an arithmetic expression.",
    {"expression": "for example 1234 + 5678"},
    lambda args: calculate(str(args["expression"])),
)


def python_tool(timeout_s: float, cpu_s: float, memory_mb: int) -> Tool:
    """Runs code in the sandbox (rewards/sandbox.py, the code reward's limits) and returns
    what it printed, or how it failed."""

    def run(args: dict[str, Any]) -> str:
        result = run_sandboxed(
            str(args["code"]), timeout_s=timeout_s, cpu_s=cpu_s, memory_mb=memory_mb
        )
        if result.killed_reason:
            return f"stopped: {result.killed_reason}\n{result.stdout}"
        if result.returncode != 0:
            return f"error (exit {result.returncode}):\n{result.stderr[-OUTPUT_CHARS:]}"
        return result.stdout

    return Tool(
        "python", "Runs Python code and returns what it prints.", {"code": "the program"}, run
    )
