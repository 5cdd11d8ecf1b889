import uvicorn
from django.core.management.base import BaseCommand, CommandError

from evalplatform import validation
from evalplatform.providers.fake import FakeConfig, FakeProvider
from evalplatform.providers.llm.mock import OPTION_BOUNDS, MockSettings

# Each numeric flag's bounds: the mock's own where they are the same thing.
BOUNDS = {
    "latency": (0.0, OPTION_BOUNDS["latency_s"][1]),
    "fault_rate": (0.0, 1.0),
    "retry_after": (0.0, 3600.0),
    "timeout": (0.0, 3600.0),
    "batch_duration": (0.0, 86_400.0),
    "batch_failure_rate": (0.0, 1.0),
    "position_bias": OPTION_BOUNDS["position_bias"][:2],
}
FAULT_KINDS = {"429", "quota", "500", "503", "529", "400", "401", "404", "timeout", "malformed"}
FAULT_KINDS |= {"truncated", "unfinished", "content_filter"}


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
        errors: dict[str, str] = {}
        for name, (lo, hi) in BOUNDS.items():
            validation.number(o[name], name=name, lo=lo, hi=hi, errors=errors)
        validation.seed(o["seed"], errors=errors)
        validation.whole_number(o["port"], name="port", lo=1, hi=65535, errors=errors)
        unknown = {k.strip() for k in o["faults"].split(",") if k.strip()} - FAULT_KINDS
        if unknown:
            errors["faults"] = "Kinds among " + ", ".join(sorted(FAULT_KINDS)) + "."
        if errors:
            raise CommandError(
                "; ".join(f"--{name.replace('_', '-')}: {m}" for name, m in errors.items())
            )
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
        self.stdout.write(
            f"Connections may call it once the platform allows the host: "
            f"PROVIDER_HOSTS_ALLOWED={o['host']} (docs/security.md)."
        )
        uvicorn.run(FakeProvider(config), host=o["host"], port=o["port"], log_level="warning")
