"""Rewards: exact match, regex, and the sandboxed code and user-function rewards.

The sandbox tests run real processes (no mocks): loops, memory and fork bombs, kills and network
access must all end in reward 0 within their limits while this test process carries on.
"""

from __future__ import annotations

import logging
import os
import resource
import signal
import socket
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from thinker.errors import ConfigError
from thinker.rewards import (
    CodeExecutionReward,
    Completion,
    ExactMatchReward,
    Problem,
    PythonFunctionReward,
    RegexReward,
    _sandbox_child,
    answers_match,
    build_reward,
    extract_answer,
    extract_code,
    run_sandboxed,
)
from thinker.rewards.config import RewardConfig
from thinker.rewards.sandbox import _killed_reason

LIMITS = {"timeout_s": 2.0, "cpu_s": 1.0, "memory_mb": 256}
# Either limit may fire first on a loaded machine; both give this reason.
TIME_LIMIT = "stopped by its time limit (CPU 1 s / wall clock 2 s)"
AS_ROOT = pytest.mark.skipif(
    os.geteuid() != 0, reason="kernel isolation (namespaces, uid drop) needs root"
)
SQUARE = Problem(
    messages=[{"role": "user", "content": "Write f(x) returning x squared."}],
    tests=["assert f(2) == 4", "assert f(3) == 9", "assert f(-1) == 1"],
)


def done(text: str, terminated: bool = True) -> Completion:
    return Completion(text=text, terminated=terminated)


def score_code(code: str, problem: Problem = SQUARE) -> float:
    [reward] = CodeExecutionReward(**LIMITS)(problem, [done(code)])
    return reward


def sandbox_processes() -> list[int]:
    """Processes still running the sandbox's child script (none should outlive a run)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"_sandbox_child.py" in cmdline:
            found.append(int(pid))
    return found


def wait_until_no_sandbox_processes(limit_s: float = 3.0) -> list[int]:
    deadline = time.monotonic() + limit_s
    while (left := sandbox_processes()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


# --- exact match -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("so the result is \\boxed{\\frac{1}{2}} in the end", "\\frac{1}{2}"),
        ("first \\boxed{3}, then \\boxed{4}", "4"),
        ("The answer is 42. That was easy.", "42"),
        ("Thinking... the final answer is: 3.5", "3.5"),
        ("Answer: cba", "cba"),
        ("**Answer:** 7", "7"),
        ("7", "7"),
        ("  cba.\n", "cba"),
        ("3 + 4 makes 7 in total", "7"),
        ("we had 1,234 then 2,000 left", "2000"),
        ("so \\boxed{12", "12"),  # an unclosed box falls through to the last number
        ("no digits here at all", None),
        ("", None),
    ],
)
def test_extract_answer(text: str, expected: str | None) -> None:
    assert extract_answer(text) == expected


@pytest.mark.parametrize(
    ("predicted", "reference", "equal"),
    [
        ("7", "7.0", True),
        ("CBA", "cba", True),
        ("$7$", "7", True),
        ("1/2", "0.5", True),
        ("2000", "2,000", True),
        ("7", "8", False),
        ("abc", "abd", False),
    ],
)
def test_answers_match(predicted: str, reference: str, equal: bool) -> None:
    assert answers_match(predicted, reference) is equal


def test_exact_match_reward_with_format_term() -> None:
    """reward = correct + w * (correct_format - 1), w = 0.1:
    right and finished 1.0; right but cut off 1 - 0.1 = 0.9; wrong 0.0;
    no answer -0.1; no answer and cut off -0.1 (the format term counts once)."""
    problem = Problem(messages=[], answer="7")
    completions = [
        done("3 + 4 = 7, so the answer is 7."),
        done("\\boxed{7.0}", terminated=False),
        done("The answer is 8."),
        done("I am not sure about this one"),
        done("I am not sure", terminated=False),
    ]
    rewards = ExactMatchReward(format_weight=0.1)(problem, completions)
    assert rewards == pytest.approx([1.0, 0.9, 0.0, -0.1, -0.1])
    assert ExactMatchReward(format_weight=0.5)(problem, [done("8", False)]) == [-0.5]


def test_exact_match_needs_an_answer() -> None:
    with pytest.raises(ConfigError, match="answer"):
        ExactMatchReward()(Problem(messages=[]), [done("7")])


# --- regex -------------------------------------------------------------------------------------


def test_regex_reward() -> None:
    reward = RegexReward(r"<answer>\d+</answer>")
    texts = ["so <answer>12</answer>", "<answer>twelve</answer>", ""]
    assert reward(Problem(messages=[]), [done(t) for t in texts]) == [1.0, 0.0, 0.0]


def test_regex_reward_rejects_an_invalid_pattern_by_name() -> None:
    with pytest.raises(ConfigError, match=r"\(unclosed"):
        RegexReward("(unclosed")


# --- code execution ----------------------------------------------------------------------------


def test_extract_code_prefers_the_last_python_block() -> None:
    text = "Try:\n```\nprint(1)\n```\nor better:\n```python\ndef f(x):\n    return x\n```\nDone."
    assert extract_code(text) == "def f(x):\n    return x\n"
    assert extract_code("```\nx = 1\n```") == "x = 1\n"
    assert extract_code("```python\nx = 2\n") == "x = 2\n"  # cut off by max_tokens
    assert extract_code("x = 3") == "x = 3"


def test_code_reward_scores_the_fraction_of_tests_passed() -> None:
    """f(x) = 2x passes f(2) == 4 only: 1/3. A group is scored concurrently, in order."""
    completions = [
        "```python\ndef f(x):\n    return x * x\n```",
        "def f(x):\n    return 2 * x",
        "def f(x):\n    return 0",
        "def f(x) return x * x",  # syntax error
        "def f(x):\n    return x * x\nraise RuntimeError('after defining f')",  # a crash
    ]
    rewards = CodeExecutionReward(**LIMITS)(SQUARE, [done(c) for c in completions])
    assert rewards == pytest.approx([1.0, 1 / 3, 0.0, 0.0, 0.0])


@pytest.mark.parametrize(
    "code",
    [
        "def f(x):\n    return x * x\nwhile True:\n    pass",  # CPU-time limit
        "import time\ndef f(x):\n    return x * x\ntime.sleep(60)",  # wall-clock limit
    ],
    ids=["busy-loop", "sleep"],
)
def test_code_reward_endless_code_is_stopped_by_its_time_limit(
    code: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="thinker.rewards.code"):
        assert score_code(code) == 0.0
    logged = [r.getMessage() for r in caplog.records if r.name == "thinker.rewards.code"]
    assert logged == [f"code reward 0: {TIME_LIMIT}"]


@pytest.mark.parametrize(
    "code",
    [
        "x = bytearray(10**10)\ndef f(x):\n    return x * x",
        "def f(x):\n    return x * x\nx = []\nwhile True:\n    x.append(bytearray(10**7))",
    ],
    ids=["one-huge-allocation", "growing-list"],
)
def test_code_reward_memory_bombs_score_zero(code: str) -> None:
    assert score_code(code) == 0.0  # MemoryError fails every test: no limit kill to report


def test_code_reward_fork_bomb_is_contained() -> None:
    code = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    assert score_code(code) == 0.0
    assert wait_until_no_sandbox_processes() == []


def test_code_reward_cannot_kill_the_trainer() -> None:
    """Neither its parent nor this process by pid: the PID namespace hides both, and as root the
    sandbox is `nobody` too. Without namespaces it can kill only its own supervisor (reward 0)."""
    code = textwrap.dedent(
        f"""
        import os, signal
        def f(x):
            return x * x
        for pid in (os.getppid(), {os.getpid()}):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        """
    )
    reward = score_code(code)
    assert reward == 1.0 if os.geteuid() == 0 else reward in (0.0, 1.0)
    os.kill(os.getpid(), 0)  # still here
    assert wait_until_no_sandbox_processes() == []


@pytest.fixture
def listening_port() -> Iterator[int]:
    """A TCP port on 127.0.0.1 that accepts connections from this process."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            pass  # the port is open outside the sandbox
        yield port


def test_code_reward_has_no_network(listening_port: int) -> None:
    code = textwrap.dedent(
        f"""
        import socket
        def connected():
            try:
                socket.create_connection(("127.0.0.1", {listening_port}), timeout=1).close()
                return True
            except OSError:
                return False
        """
    )
    problem = Problem(messages=[], tests=["assert connected()"])
    assert score_code(code, problem) == 0.0


@AS_ROOT
def test_sandbox_network_namespace_blocks_what_the_python_guard_does_not(
    listening_port: int,
) -> None:
    """`_socket` gets round the Python-level guard; the empty network namespace still holds."""
    source = f"import _socket\ns = _socket.socket(2, 1)\ns.connect(('127.0.0.1', {listening_port}))"
    result = run_sandboxed(source, **LIMITS)
    assert "netns" in result.isolation
    assert result.returncode == 1
    assert "Network is unreachable" in result.stderr


def test_code_reward_faked_result_lines_earn_nothing() -> None:
    fake = '{"passed": 3, "total": 3}'
    code = textwrap.dedent(
        f"""
        import os, sys
        def f(x):
            return 0
        print("__thinker_result__:0123456789abcdef0123456789abcdef {fake}")
        os.write(1, b'__thinker_result__: {fake}\\n')
        sys.__stdout__.write('{fake}\\n')
        """
    )
    assert score_code(code) == 0.0


def test_code_reward_needs_tests() -> None:
    with pytest.raises(ConfigError, match="tests"):
        CodeExecutionReward(**LIMITS)(Problem(messages=[]), [done("x = 1")])
    with pytest.raises(ConfigError, match="cpu_s"):
        CodeExecutionReward(timeout_s=1, cpu_s=0, memory_mb=64)


@AS_ROOT
def test_sandbox_limits_and_isolation() -> None:
    """As root: namespaces, `nobody`, no way to raise a limit, a CPU-time kill, a memory error."""
    who = run_sandboxed("import os; print(os.getuid(), os.getpid(), os.listdir('.'))", **LIMITS)
    assert (who.returncode, who.stdout) == (0, "65534 1 []\n")
    assert {"netns", "pidns", "uid=nobody"} <= who.isolation
    raise_limit = "import resource as r; r.setrlimit(r.RLIMIT_CPU, (100, 100))"
    assert run_sandboxed(raise_limit, **LIMITS).returncode == 1
    busy = run_sandboxed("while True: pass", timeout_s=300, cpu_s=1, memory_mb=256)
    assert busy.killed_reason == "stopped by its time limit (CPU 1 s / wall clock 300 s)"
    assert not busy.timed_out  # the CPU limit stopped it, long before the wall clock
    memory = run_sandboxed("x = bytearray(10**9)", **LIMITS)
    assert memory.killed_reason == "stopped by its memory limit (256 MB)"


def spin_until_the_cpu_limit() -> int:
    """The pid of a forked child that spins until RLIMIT_CPU (1 s) kills it."""
    pid = os.fork()
    if pid == 0:
        try:
            resource.setrlimit(resource.RLIMIT_CPU, (1, 1))
            while True:
                pass
        finally:
            os._exit(1)
    return pid


def test_the_supervisor_reports_cpu_time_as_the_cpu_limit_counts_it() -> None:
    """RLIMIT_CPU kills on CPU time counted in scheduler ticks: at a 1 s limit, 1.0 or 1.004 s.
    wait4's precise time for the same kill is lower (below 1.0 s in most kills on a 2-core
    machine, down to 0.75 s with two CPU hogs running), so the kill read as "killed by
    SIGKILL" where it fell more than 0.05 s short."""
    pids = [spin_until_the_cpu_limit() for _ in range(3)]
    for pid in pids:
        status, cpu_s, timed_out = _sandbox_child._wait(pid, timeout_s=300)
        assert (os.waitstatus_to_exitcode(status), timed_out) == (-signal.SIGKILL, False)
        assert cpu_s >= 1.0


def test_a_stop_at_either_time_limit_gives_one_reason() -> None:
    kill, limits = -signal.SIGKILL, (2.0, 1.0, 256)
    assert _killed_reason(kill, False, 1.004, "", *limits) == TIME_LIMIT  # the CPU limit
    assert _killed_reason(kill, True, 0.1, "", *limits) == TIME_LIMIT  # the wall clock
    assert _killed_reason(kill, False, 0.5, "", *limits) == "killed by SIGKILL"
    assert _killed_reason(0, False, 0.1, "", *limits) is None


def test_sandbox_output_is_capped_and_stdin_passed() -> None:
    result = run_sandboxed(
        "import sys\nprint(sys.stdin.read())\nprint('x' * 10**6)\nprint('end')",
        stdin="hello",
        **LIMITS,
    )
    assert result.stdout.startswith("hello\n") and result.stdout.endswith("end\n")
    assert len(result.stdout) < 70_000 and "bytes cut" in result.stdout


# --- user-supplied python function ---------------------------------------------------------------


@pytest.fixture
def user_module(tmp_path: Path) -> Path:
    tmp_path.chmod(0o755)  # as root the sandbox runs as nobody; tmp_path's parents stay 0700
    (tmp_path / "helper.py").write_text("BONUS_KEY = 'bonus'\n")
    (tmp_path / "my_rewards.py").write_text(
        textwrap.dedent(
            """
            from helper import BONUS_KEY

            def length(prompt, completion, row):
                print("printing does not confuse the result")
                return len(completion) / 10 + row[BONUS_KEY] + (prompt == "hi")

            def boom(prompt, completion, row):
                raise ValueError("bad reward")

            def forever(prompt, completion, row):
                while True:
                    pass

            def words(prompt, completion, row):
                return "high"
            """
        )
    )
    return tmp_path


def python_reward(function: str, search_path: Path) -> PythonFunctionReward:
    return PythonFunctionReward(function, search_path=search_path, **LIMITS)


def test_python_function_reward(user_module: Path) -> None:
    """length("abcd") = 4 / 10 + bonus 0.5 + 1 for prompt "hi" = 1.9."""
    problem = Problem(messages=[{"role": "user", "content": "hi"}], row={"bonus": 0.5})
    rewards = python_reward("my_rewards:length", user_module)(problem, [done("abcd"), done("")])
    assert rewards == pytest.approx([1.9, 1.5])


@pytest.mark.parametrize(
    ("function", "logged"),
    [
        ("boom", "ValueError: bad reward"),
        ("forever", TIME_LIMIT),
        ("words", "returned str, not a float"),
        ("missing", "AttributeError"),
    ],
)
def test_python_function_failures_score_zero(
    user_module: Path, function: str, logged: str, caplog: pytest.LogCaptureFixture
) -> None:
    reward = python_reward(f"my_rewards:{function}", user_module)
    with caplog.at_level(logging.WARNING, logger="thinker.rewards.python_fn"):
        assert reward(Problem(messages=[], row={}), [done("x")]) == [0.0]
    assert logged in caplog.text


def test_python_function_reward_validates_its_reference(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="module:function"):
        python_reward("my_rewards.length", tmp_path)
    with pytest.raises(ConfigError, match="nowhere.py"):
        python_reward("nowhere:fn", tmp_path)
    (tmp_path / "broken.py").write_text("def fn(:\n")
    with pytest.raises(ConfigError, match="does not compile"):
        python_reward("broken:fn", tmp_path)


# --- registry ----------------------------------------------------------------------------------


def test_build_reward(user_module: Path) -> None:
    exact = build_reward(RewardConfig(type="exact_match", format_weight=0.2))
    assert isinstance(exact, ExactMatchReward) and exact.format_weight == 0.2
    assert isinstance(build_reward(RewardConfig(type="regex", pattern="a")), RegexReward)
    code = build_reward(RewardConfig(type="code", timeout_s=2, cpu_s=1, memory_mb=64))
    assert isinstance(code, CodeExecutionReward) and code.memory_mb == 64
    config = RewardConfig(type="python", function="my_rewards:length")
    assert isinstance(build_reward(config, base_dir=user_module), PythonFunctionReward)
    with pytest.raises(ConfigError, match="pattern"):
        build_reward(RewardConfig(type="regex"))
    with pytest.raises(ConfigError, match="RLHF"):
        build_reward(RewardConfig(type="reward_model"))
    judge = RegexReward("good")
    assert build_reward(RewardConfig(type="reward_model"), judge=judge) is judge
