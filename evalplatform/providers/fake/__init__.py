"""The fake provider server: OpenAI, Anthropic and Gemini protocols on one loopback port,
with configurable latency and fault injection. ``python manage.py fake_provider`` runs it;
``run_in_thread`` serves it for tests and benchmarks."""

from evalplatform.providers.fake.app import FakeConfig, FakeProvider
from evalplatform.providers.fake.server import run_in_thread

__all__ = ["FakeConfig", "FakeProvider", "run_in_thread"]
