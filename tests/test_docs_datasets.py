"""docs/datasets-and-tokenizers.md's commands, run as written (tests/test_readme.py's harness; a file of
its own, so that pytest-xdist's workers share the pages out)."""

import pytest

from tests.test_readme import commands_of, machine_of, run_page_command  # noqa: F401


@pytest.mark.slow
@pytest.mark.parametrize('page, command', commands_of(__file__))
def test_page_command(machine_of, page, command):  # pylint: disable=redefined-outer-name
  run_page_command(machine_of, page, command)
