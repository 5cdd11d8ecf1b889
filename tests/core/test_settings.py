"""The settings switch, checked in fresh interpreters with the environment each mode uses."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import json, django
from django.conf import settings
django.setup()
print(json.dumps({
    "engine": settings.DATABASES["default"]["ENGINE"],
    "db_name": str(settings.DATABASES["default"]["NAME"]),
    "db_options": {k: str(v) for k, v in settings.DATABASES["default"].get("OPTIONS", {}).items()},
    "channels": settings.CHANNEL_LAYERS["default"]["BACKEND"],
    "q_redis": settings.Q_CLUSTER.get("redis"),
    "q_orm": settings.Q_CLUSTER.get("orm"),
    "secret": settings.SECRET_KEY,
    "debug": settings.DEBUG,
}))
"""


def run_settings(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "DEBUG", "ENCRYPTION_KEYS"}
    }
    clean |= {"EVAL_DATA_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "evalplatform.settings"}
    clean |= env
    return subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
    )


def probe(tmp_path: Path, **env: str) -> dict:
    result = run_settings(tmp_path, **env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_embedded_default_sqlite_wal_orm_broker_local_channels(tmp_path):
    values = probe(tmp_path)
    assert values["engine"] == "django.db.backends.sqlite3"
    assert values["db_name"] == str(tmp_path / "db.sqlite3")
    assert "journal_mode=WAL" in values["db_options"]["init_command"]
    assert values["db_options"]["transaction_mode"] == "IMMEDIATE"
    assert int(values["db_options"]["timeout"]) >= 5
    assert values["q_orm"] == "default" and values["q_redis"] is None
    assert values["channels"] == "channels.layers.InMemoryChannelLayer"
    assert values["debug"] is False


SHARED_KEYS = {
    "SECRET_KEY": "k" + "0123456789abcdefghijklmnopqrstuvwxyz" * 2,
    "ENCRYPTION_KEYS": "Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4Zm9vYmFyYmE=",
}


def test_database_url_and_redis_url_switch_to_scale_mode(tmp_path):
    values = probe(
        tmp_path,
        DATABASE_URL="postgres://evaluser@db.example:5432/evals",
        REDIS_URL="redis://cache.example:6379/2",
        **SHARED_KEYS,
    )
    assert values["engine"] == "django.db.backends.postgresql"
    assert values["db_name"] == "evals"
    assert values["channels"] == "channels_redis.core.RedisChannelLayer"
    assert values["q_redis"] == "redis://cache.example:6379/2" and values["q_orm"] is None
    assert values["secret"] == SHARED_KEYS["SECRET_KEY"]
    assert not (tmp_path / "secret_key").exists()


def test_db_pool_gives_each_web_process_a_connection_pool(tmp_path):
    scale = {"DATABASE_URL": "postgres://evaluser@db.example:5432/evals", **SHARED_KEYS}
    assert "pool" not in probe(tmp_path, **scale)["db_options"]
    pooled = probe(tmp_path, DB_POOL="1", DB_POOL_MAX="7", **scale)["db_options"]["pool"]
    assert "'max_size': 7" in pooled and "'min_size': 2" in pooled
    # Persistent connections and a pool exclude each other (Django refuses both at once).
    refused = run_settings(tmp_path, DB_POOL="1", DB_CONN_MAX_AGE="60", **scale)
    assert refused.returncode != 0 and "DB_POOL=1 needs DB_CONN_MAX_AGE=0" in refused.stderr


@pytest.mark.parametrize("missing", ["SECRET_KEY", "ENCRYPTION_KEYS"])
@pytest.mark.parametrize("url", ["DATABASE_URL", "REDIS_URL"])
def test_scale_mode_refuses_to_generate_per_host_keys(tmp_path, missing, url):
    env = {k: v for k, v in SHARED_KEYS.items() if k != missing}
    target = "postgres://u@db:5432/x" if url == "DATABASE_URL" else "redis://cache:6379/0"
    result = run_settings(tmp_path, **{url: target}, **env)
    assert result.returncode != 0
    assert f"needs {missing}" in result.stderr
    assert not (tmp_path / "secret_key").exists() and not (tmp_path / "encryption_key").exists()


def test_secret_key_is_generated_once_and_kept_private(tmp_path):
    first = probe(tmp_path)["secret"]
    key_file = tmp_path / "secret_key"
    assert key_file.read_text().strip() == first and len(first) >= 50
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert probe(tmp_path)["secret"] == first


@pytest.mark.parametrize("weak", ["short", "django-insecure-" + "x" * 40, "a" * 60])
def test_weak_secret_key_refused_without_debug(tmp_path, weak):
    result = run_settings(tmp_path, SECRET_KEY=weak, DEBUG="0")
    assert result.returncode != 0
    assert "SECRET_KEY is too weak" in result.stderr
    assert probe(tmp_path, SECRET_KEY=weak, DEBUG="1")["secret"] == weak


def test_bad_boolean_is_a_clear_error(tmp_path):
    result = run_settings(tmp_path, DEBUG="maybe")
    assert result.returncode != 0 and "DEBUG must be a boolean" in result.stderr
