"""``python manage.py serve``: the whole platform on one machine (web + task worker)."""

from __future__ import annotations

import signal
import subprocess
import sys

import uvicorn
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

from evalplatform.bootstrap import bootstrap


class Command(BaseCommand):
    help = "Migrate, create the first admin if none exists, then run the web server and a worker."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--no-worker", action="store_true", help="Do not start qcluster.")

    def handle(self, *args, host, port, no_worker, **options):
        call_command("migrate", interactive=False, verbosity=0)
        result = bootstrap()
        if result.created_admin and result.password:
            self.stdout.write(
                self.style.SUCCESS(
                    f"First admin created. Sign in as {result.username!r} with password "
                    f"{result.password!r} (change it in the admin; it is not shown again)."
                )
            )
        elif result.created_admin:
            self.stdout.write(f"First admin {result.username!r} created from EVAL_ADMIN_PASSWORD.")
        database = settings.DATABASES["default"]
        self.stdout.write(
            f"Database: {database['ENGINE'].rsplit('.', 1)[-1]} {database['NAME']}; "
            f"data directory: {settings.DATA_DIR}"
        )
        worker = None
        if not no_worker:
            worker = subprocess.Popen([sys.executable, sys.argv[0], "qcluster"])  # noqa: S603
        self.stdout.write(f"Serving on http://{host}:{port}/ (Ctrl+C to stop)", ending="\n")
        self.stdout.flush()
        try:
            uvicorn.run(
                "evalplatform.asgi:application",
                host=host,
                port=port,
                log_level="info",
                lifespan="off",
                # WebSocket clients only listen: no message from them needs more than this.
                ws_max_size=64 * 1024,
            )
        finally:
            if worker is not None and worker.poll() is None:
                worker.send_signal(signal.SIGTERM)
                try:
                    worker.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    worker.kill()
