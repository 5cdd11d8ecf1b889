"""The docs' screenshots, taken from the real pages: the demo's data in a fresh data
directory, `manage.py serve` on a free port, Debian's Chromium driven by Playwright.

    .venv/bin/python docs/screenshots.py --out docs/images

Writes wizard.png (a step that says what it needs), convert.png (the scenario form of a
job's outputs, refused with what was typed kept), review.png (a disputed task opened),
evaluator-404.png and analytics.png (the summary above the tabs). Needs Chromium
(`apt-get install chromium`) and the `dev` extra (Playwright). Nothing leaves the machine:
the demo runs on the offline mock provider.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PASSWORD = "screens-Only-123"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def demo(env: dict[str, str]) -> dict[str, int]:
    """The demo's data, with known passwords for its users; the ids the pages need."""
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "demo"], env=env, check=True, stdout=subprocess.DEVNULL)
    script = (
        "from django.contrib.auth import get_user_model\n"
        "from generation.models import GenerationJob\n"
        "from scenarios.models import Scenario\n"
        "users = get_user_model().objects\n"
        "for name in ('demo-manager', 'demo-evaluator'):\n"
        f"    u = users.get(username=name); u.set_password({PASSWORD!r}); u.save()\n"
        "job = GenerationJob.objects.get(name='Demo: feedback on writing samples')\n"
        "pairs = Scenario.objects.get(name='Demo: which feedback helps more')\n"
        "print(job.pk, pairs.pk)\n"
    )
    found = subprocess.run(
        [*manage, "shell", "-c", script], env=env, check=True, capture_output=True, text=True
    )
    job, pairs = (int(n) for n in found.stdout.split()[-2:])
    return {"job": job, "pairs": pairs}


def serve(env: dict[str, str], port: int) -> subprocess.Popen[bytes]:
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(120):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return server
        except OSError:
            time.sleep(0.5)
    server.kill()
    raise SystemExit("serve did not start")


def sign_in(page, base: str, username: str) -> None:
    page.context.clear_cookies()
    page.goto(f"{base}/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_load_state()


def shoot(page, out: Path, name: str) -> None:
    page.screenshot(path=str(out / name), full_page=False)
    print(f"wrote {out / name}")


def take(base: str, ids: dict[str, int], out: Path) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS
        )
        page = browser.new_page(viewport={"width": 1100, "height": 820})
        sign_in(page, base, "demo-manager")

        page.goto(f"{base}/generation/new")
        page.get_by_role("button", name="Next >").click()
        shoot(page, out, "wizard.png")

        convert = f"{base}/generation/jobs/{ids['job']}/to-scenario"
        page.goto(convert)
        page.get_by_label("Type").select_option("rating")
        page.locator('[name="dim-0-name"]').fill("Clarity")
        page.locator('[name="dim-0-min"]').fill("5")
        page.locator('[name="dim-0-max"]').fill("1")
        page.get_by_role("button", name="Create scenario").click()
        page.wait_for_load_state()
        shoot(page, out, "convert.png")

        page.goto(f"{base}/scenarios/{ids['pairs']}/review")
        page.locator("details.review-task").first.locator(":scope > summary").click()
        shoot(page, out, "review.png")

        page.goto(f"{base}/scenarios/{ids['pairs']}/analytics")
        for _ in range(60):  # the analysis may still be computing on the worker
            if page.locator("#summary").count():
                break
            time.sleep(1)
            page.reload()
        shoot(page, out, "analytics.png")

        sign_in(page, base, "demo-evaluator")
        page.goto(f"{base}/scenarios/999999/review")
        shoot(page, out, "evaluator-404.png")
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as data:
        env = {
            key: value
            for key, value in os.environ.items()
            if key not in ("DATABASE_URL", "REDIS_URL")
        } | {"EVAL_DATA_DIR": data}
        ids = demo(env)
        port = free_port()
        server = serve(env, port)
        try:
            take(f"http://127.0.0.1:{port}", ids, args.out.resolve())
        finally:
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    main()
