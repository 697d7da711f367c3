"""The real-client suite: every test in this folder carries the `agents` marker.

`make test` leaves it out; `make test-agents` (and CI) runs it with
KIROLEARN_REQUIRE_AGENTS=1, so a missing agent fails instead of skipping.
"""

import pathlib

import pytest

HERE = pathlib.Path(__file__).parent


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE in pathlib.Path(str(item.path)).parents:
            item.add_marker(pytest.mark.agents)
            item.add_marker(pytest.mark.timeout(900))  # a cold npm install plus a few real sessions
