"""`thinker --help` lists every command, those with parsers of their own included."""

from __future__ import annotations

import re

import pytest

from thinker.cli import main

COMMANDS = ("validate", "train", "eval", "run", "serve", "token", "datasets")


def help_text(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main([*argv, "--help"]) == 0
    return capsys.readouterr().out


def described(text: str, command: str) -> str | None:
    """The one-line description that `text` gives `command` in its list of commands."""
    found = re.search(rf"^ {{4}}{command} +(\S.*)$", text, re.MULTILINE)
    return found.group(1) if found else None


def test_every_command_is_listed_with_a_description(capsys: pytest.CaptureFixture[str]) -> None:
    text = help_text(capsys)
    assert {c: bool(described(text, c)) for c in COMMANDS} == dict.fromkeys(COMMANDS, True)
    assert described(text, "serve") == (
        "start the platform server: REST API, Socket.IO and the dashboard"
    )


def test_datasets_lists_its_subcommands(capsys: pytest.CaptureFixture[str]) -> None:
    text = help_text(capsys, "datasets")
    assert described(text, "inspect") and described(text, "import")
    assert main(["datasets"]) == 2  # a subcommand is needed
    assert "required: SUBCOMMAND" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["serve", "token", "datasets inspect", "datasets import"])
def test_their_own_parsers_still_answer_their_help(
    capsys: pytest.CaptureFixture[str], command: str
) -> None:
    assert f"usage: thinker {command}" in help_text(capsys, *command.split())
