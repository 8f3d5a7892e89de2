"""The layers of docs/architecture.md hold: every import points down (import-linter's layers
contract in pyproject.toml), every module of the package is in a layer, and an import inside
a function says why it is there (a heavy or optional import deferred)."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "backend" / "thinker"


def _contract() -> dict[str, object]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    (contract,) = config["tool"]["importlinter"]["contracts"]
    return contract  # type: ignore[no-any-return]


def test_no_module_imports_from_a_layer_above_its_own() -> None:
    linter = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert linter is not None, "import-linter is a dev dependency: pip install -e '.[dev]'"
    run = subprocess.run(
        [linter, "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    # On a failure its report names each import that points up, by module and line.
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Contracts: 1 kept, 0 broken." in run.stdout


def test_every_module_of_the_package_is_in_a_layer() -> None:
    layers = _contract()["layers"]
    assert isinstance(layers, list)
    named = {name.strip() for layer in layers for name in str(layer).split(":")}
    named = {part.strip() for name in named for part in name.split("|")}
    modules = {
        f"thinker.{p.stem if p.is_file() else p.name}"
        for p in PACKAGE.iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()
    }
    assert sorted(modules - named) == []


def test_imports_inside_functions_say_why() -> None:
    """An import inside a function defers a heavy or optional import; a comment on its line or
    just above says so (an optional one may instead sit in `try: ... except ImportError`)."""
    unexplained = []
    for path in sorted(PACKAGE.rglob("*.py")):
        lines = path.read_text().splitlines()
        tree = ast.parse("\n".join(lines))
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            optional = _optional_imports(node)
            for child in ast.walk(node):
                deferred = isinstance(child, ast.Import | ast.ImportFrom) and child not in optional
                if deferred and not _explained(lines, child.lineno):
                    where = f"{path.relative_to(REPO)}:{child.lineno}"
                    unexplained.append(f"{where}: {lines[child.lineno - 1].strip()}")
    assert unexplained == []


def _optional_imports(function: ast.AST) -> set[ast.AST]:
    found: set[ast.AST] = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Try) and any(
            isinstance(h.type, ast.Name) and h.type.id == "ImportError" for h in node.handlers
        ):
            found.update(n for s in node.body for n in ast.walk(s))
    return found


def _explained(lines: list[str], lineno: int) -> bool:
    """A comment on the import's line, or above it and the imports (and blank lines) just
    before it."""
    if "#" in lines[lineno - 1]:
        return True
    for text in (line.strip() for line in reversed(lines[: lineno - 1])):
        if text.startswith("#"):
            return True
        if not (
            text == "" or text == ")" or text.endswith(",") or text.startswith(("from ", "import "))
        ):
            return False
    return False
