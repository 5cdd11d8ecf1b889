import pytest

from evalplatform.accounts.roles import Role
from tests.conftest import add_member
from tests.factories import ConnectionFactory, LLMModelFactory
from tests.generation.conftest import creator, job_body, setup  # noqa: F401 (shared fixtures)
from tests.scenarios.conftest import finished_job  # noqa: F401


def team_people(team_a, team_b):
    """A manager, a viewer and an evaluator of team A, and an admin of team B."""
    return {
        "manager": add_member(team_a, Role.MANAGER),
        "viewer": add_member(team_a, Role.VIEWER),
        "evaluator": add_member(team_a, Role.EVALUATOR),
        "outsider": add_member(team_b, Role.ADMIN),
    }


@pytest.fixture
def people(team_a, team_b):
    """``team_people`` (modules that need other people define their own)."""
    return team_people(team_a, team_b)


def mock_judge_model(team):
    """The offline mock provider's judge model in ``team``."""
    connection = ConnectionFactory(team=team, kind="mock", name="mock")
    return LLMModelFactory(connection=connection, model_id="mock-judge", display_name="Judge")


@pytest.fixture
def mock_judge(team_a):
    """The offline mock provider's judge model in team A."""
    return mock_judge_model(team_a)
