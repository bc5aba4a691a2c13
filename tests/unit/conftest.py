"""The unit tier starts no Prefect server and no Dask cluster (tests/conftest.py's `prefect_api`, `shared_dask`,
`shared_env`, `keyed_dask`, `keyed_env`): a unit test that asks for one, directly or through its fixtures, fails
naming itself and the fixture, before anything is started. A test that needs one belongs in tests/e2e/ or
tests/system/; a command that must refuse before any server starts is run against `DEAD_API`
(tests/support/harness.py) instead."""

from __future__ import annotations

import pytest

SERVERS = ("prefect_api", "shared_dask", "shared_env", "keyed_dask", "keyed_env")


def _refuse(request: pytest.FixtureRequest, fixtures: list[str]) -> None:
    pytest.fail(
        f"{request.node.nodeid} is a unit test and asks for {', '.join(fixtures)}: the unit tier starts no Prefect "
        "server and no Dask cluster; move the test to tests/e2e/ (or tests/system/), or run its command against "
        "tests.support.harness.DEAD_API if it must refuse before any server starts",
        pytrace=False,
    )


@pytest.fixture(autouse=True)
def _unit_tests_start_no_servers(request: pytest.FixtureRequest) -> None:
    """Fails the test if its fixture closure holds a server fixture (the closure is known before any fixture runs)."""
    asked = [name for name in SERVERS if name in request.fixturenames]
    if asked:
        _refuse(request, asked)


# The same names, overridden for this folder, so that nothing is started whatever asks: a request.getfixturevalue()
# in a test (not in the closure the check above reads) fails that test with the same words; a module- or
# session-scoped fixture of a unit test that asks for one (set up before the check) is a ScopeMismatch error naming
# both fixtures.


@pytest.fixture
def prefect_api(request: pytest.FixtureRequest) -> str:
    _refuse(request, ["prefect_api"])
    raise AssertionError("unreachable")


@pytest.fixture
def shared_dask(request: pytest.FixtureRequest) -> str:
    _refuse(request, ["shared_dask"])
    raise AssertionError("unreachable")


@pytest.fixture
def shared_env(request: pytest.FixtureRequest) -> dict[str, str]:
    _refuse(request, ["shared_env"])
    raise AssertionError("unreachable")


@pytest.fixture
def keyed_dask(request: pytest.FixtureRequest) -> str:
    _refuse(request, ["keyed_dask"])
    raise AssertionError("unreachable")


@pytest.fixture
def keyed_env(request: pytest.FixtureRequest) -> dict[str, str]:
    _refuse(request, ["keyed_env"])
    raise AssertionError("unreachable")
