"""Fixtures of the evaluations' tests (``people`` and the other casts, ``creator``, ``setup``
and ``finished_job``: ``tests/conftest.py``)."""

import pytest

from tests.helpers.evaluations import mock_judge_model


@pytest.fixture
def mock_judge(team_a):
    """The offline mock provider's judge model in team A."""
    return mock_judge_model(team_a)
