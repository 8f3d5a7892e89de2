"""The test suite's own layout: no module under tests/ imports a test module or a conftest.py.
What modules share lives in tests/support/ (helpers) or a conftest.py (fixtures), so running
one test file never runs another's module code, and pytest never imports a module twice under
two names (`api.test_jobs` as collected, `tests.api.test_jobs` as imported)."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def _is_test_module(name: str) -> bool:
    last = name.rsplit(".", 1)[-1]
    return last.startswith("test_") or last == "conftest"


def imports_of_test_modules(source: str) -> list[tuple[int, str]]:
    """(line, module) for each import of a test module or conftest in `source`."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            names = [module] + [f"{module.rstrip('.')}.{alias.name}" for alias in node.names]
        else:
            continue
        found += [(node.lineno, name) for name in names if _is_test_module(name)][:1]
    return sorted(found)


def test_the_check_finds_every_form_of_import() -> None:
    source = "\n".join(
        [
            "from tests.api.test_jobs import wait_state",
            "from .test_sampling import trained",
            "from .conftest import make_settings",
            "from tests.api import test_jobs",
            "from . import conftest",
            "import tests.unit.test_hf_import as hub",
            "def f():",
            "    from test_jobs import EXAMPLES",
            "from tests.support.api import make_settings",
            "from tests.disk import tmpfs",
            "import tiny_lora",
        ]
    )
    assert imports_of_test_modules(source) == [
        (1, "tests.api.test_jobs"),
        (2, ".test_sampling"),
        (3, ".conftest"),
        (4, "tests.api.test_jobs"),
        (5, ".conftest"),
        (6, "tests.unit.test_hf_import"),
        (8, "test_jobs"),
    ]


def test_no_module_imports_a_test_module_or_a_conftest() -> None:
    problems = [
        f"{path.relative_to(TESTS.parent)}:{line} imports {module}"
        for path in sorted(TESTS.rglob("*.py"))
        for line, module in imports_of_test_modules(path.read_text())
    ]
    assert not problems, (
        "move what these imports need into tests/support/ (helpers) or a conftest.py "
        "(fixtures):\n" + "\n".join(problems)
    )
