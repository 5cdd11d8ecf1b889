import uvicorn
from django.core.management.base import BaseCommand

from evalplatform.providers.fake import FakeConfig, FakeProvider
from evalplatform.providers.llm.mock import MockSettings


class Command(BaseCommand):
    help = (
        "Serve the fake OpenAI / Anthropic / Gemini server on loopback, with optional latency "
        "and injected faults (prompts may also carry [[fault:KIND]] markers)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8900)
        parser.add_argument("--latency", type=float, default=0.0, help="Seconds per request.")
        parser.add_argument("--fault-rate", type=float, default=0.0, help="Share of requests.")
        parser.add_argument(
            "--faults", default="429,500,529,timeout,malformed", help="Kinds drawn from."
        )
        parser.add_argument("--retry-after", type=float, default=1.0)
        parser.add_argument("--timeout", type=float, default=30.0, help="How long a timeout hangs.")
        parser.add_argument("--batch-duration", type=float, default=1.0)
        parser.add_argument("--batch-failure-rate", type=float, default=0.0)
        parser.add_argument("--position-bias", type=float, default=0.0)
        parser.add_argument("--seed", type=int, default=0)

    def handle(self, *args, **o):
        config = FakeConfig(
            latency_s=o["latency"],
            fault_rate=o["fault_rate"],
            fault_kinds=tuple(k.strip() for k in o["faults"].split(",") if k.strip()),
            retry_after_s=o["retry_after"],
            timeout_s=o["timeout"],
            batch_duration_s=o["batch_duration"],
            batch_failure_rate=o["batch_failure_rate"],
            seed=o["seed"],
            mock=MockSettings(seed=o["seed"], position_bias=o["position_bias"]),
        )
        self.stdout.write(f"Fake provider on http://{o['host']}:{o['port']} (Ctrl+C to stop)")
        uvicorn.run(FakeProvider(config), host=o["host"], port=o["port"], log_level="warning")
