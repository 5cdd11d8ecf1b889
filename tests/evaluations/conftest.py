import pytest

from evalplatform.accounts.roles import Role
from tests.factories import ConnectionFactory, LLMModelFactory
from tests.generation.conftest import creator, job_body, setup  # noqa: F401 (shared fixtures)
from tests.scenarios.conftest import finished_job  # noqa: F401


@pytest.fixture
def people(team_a, team_b, member):
    """A manager, a viewer and an evaluator of team A, and an admin of team B (modules
    that need other people define their own)."""
    return {
        "manager": member(team_a, Role.MANAGER),
        "viewer": member(team_a, Role.VIEWER),
        "evaluator": member(team_a, Role.EVALUATOR),
        "outsider": member(team_b, Role.ADMIN),
    }


@pytest.fixture
def mock_judge(team_a):
    """The offline mock provider's judge model in team A."""
    connection = ConnectionFactory(team=team_a, kind="mock", name="mock")
    return LLMModelFactory(connection=connection, model_id="mock-judge", display_name="Judge")
