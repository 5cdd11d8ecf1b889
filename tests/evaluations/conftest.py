from tests.generation.conftest import creator, job_body, setup  # noqa: F401 (shared fixtures)
from tests.scenarios.conftest import finished_job  # noqa: F401
