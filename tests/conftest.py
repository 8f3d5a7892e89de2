"""Shared test settings: offline hub, deterministic CPU threads; the databases of the API and
platform tiers.

Each test that takes `database_url` runs on SQLite, the default database; a test marked
`postgresql` runs on PostgreSQL too. That mark goes on the tests whose subject is what the
database stores and how it is asked: rows, constraints and bad values reaching them, lists,
filters and pages, the queue's order, tokens, a restarted server reading its jobs back,
migrations, and every operation of the API (tests/api/test_schemathesis.py). The tests whose
subject is a worker's training, sampling or a disk run on SQLite only: the database is not
what they check, and running them twice cost a quarter of the suite's time.

The PostgreSQL runs need `THINKER_TEST_POSTGRES_URL` (`eval "$(scripts/postgres.sh)"` starts a
server and prints it; `./test.sh` does this); without it they are skipped, unless
`THINKER_REQUIRE_POSTGRES=1` (CI), which turns the skip into a failure. Every PostgreSQL test
gets a database of its own.
"""

import os
from collections import defaultdict
from collections.abc import Iterator

import pytest
from tests.support.database import DATABASES, fresh_database

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "database_url" in metafunc.fixturenames:
        on_both = metafunc.definition.get_closest_marker("postgresql") is not None
        metafunc.parametrize("database_url", DATABASES if on_both else ["sqlite"], indirect=True)


@pytest.fixture
def database_url(request: pytest.FixtureRequest) -> Iterator[str | None]:
    """None (SQLite in the data directory) or the URL of a fresh PostgreSQL database."""
    with fresh_database(request.param) as url:
        yield url


# Each test file's time (setup, call and teardown of its tests, summed over the workers), shown
# after the run: what to look at first when the suite grows slower than CI's budget.
FILE_SECONDS: defaultdict[str, float] = defaultdict(float)
SLOWEST_FILES = 25


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    FILE_SECONDS[report.nodeid.split("::")[0]] += report.duration


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if len(FILE_SECONDS) < 2:
        return
    total = sum(FILE_SECONDS.values())
    terminalreporter.write_sep("=", f"slowest test files (seconds of {total:.0f} in all)")
    for path, seconds in sorted(FILE_SECONDS.items(), key=lambda kv: -kv[1])[:SLOWEST_FILES]:
        terminalreporter.write_line(f"{seconds:8.1f}  {path}")
