"""What the server cannot do for now is said as such: a database another request holds
locked is a 503 with ``Retry-After`` (JSON on the API, a page of the site on the web), a
full disk a 507, never an anonymous HTML 500; nothing is half-written."""

from __future__ import annotations

import gc
import os
import sqlite3
import subprocess
import tempfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test import Client, override_settings

from evalplatform.prompts.models import PromptTemplate
from generation.models import GenerationJob

TEMPLATES = "/api/prompts/templates"
BODY = {"team": "team-a", "name": "Locked out", "blocks": [{"title": "", "body": "Hi {{x}}"}]}


@pytest.fixture
def database_held(transactional_db):
    """Another process's write transaction on the test database (SQLite: its one writer;
    PostgreSQL: a table lock), with this connection's wait for it cut short."""
    if connection.vendor == "sqlite":
        holder = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        options = connection.settings_dict.setdefault("OPTIONS", {})
        saved = options.get("timeout")
        options["timeout"] = 0.2
        connection.close()
        try:
            yield
        finally:
            holder.execute("ROLLBACK")
            holder.close()
            options["timeout"] = saved
            connection.close()
        return
    import psycopg

    settings = connection.settings_dict
    holder = psycopg.connect(
        host=settings["HOST"] or None,
        port=settings["PORT"] or None,
        user=settings["USER"] or None,
        password=settings["PASSWORD"] or None,
        dbname=settings["NAME"],
    )
    holder.execute(
        "LOCK TABLE prompts_prompttemplate, accounts_loginfailure IN ACCESS EXCLUSIVE MODE"
    )
    with connection.cursor() as cursor:
        cursor.execute("SET lock_timeout = '200ms'")
    try:
        yield
    finally:
        holder.rollback()
        holder.close()
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = 0")


def test_a_locked_database_is_a_503_with_retry_after_on_the_api(api, creator, database_held):
    client = api(creator)
    client.raise_request_exception = False
    response = client.post(TEMPLATES, BODY, format="json")
    assert response.status_code == 503
    assert response["Content-Type"] == "application/json"
    assert response["Retry-After"] == "5"
    assert "busy with another request" in response.json()["detail"]


def test_a_locked_database_is_a_page_of_the_site_on_the_web(creator, database_held):
    # A failed sign-in is written down (the sign-in throttle): the write meets the lock.
    client = Client(raise_request_exception=False)
    page = client.post("/login/", {"username": creator.username, "password": "wrong"})
    assert page.status_code == 503 and page["Retry-After"] == "5"
    assert "Try again soon" in page.content.decode() and "site.css" in page.content.decode()


@pytest.mark.django_db
def test_without_the_lock_the_same_request_succeeds(api, creator):
    assert api(creator).post(TEMPLATES, BODY, format="json").status_code == 201
    assert PromptTemplate.objects.filter(name="Locked out").count() == 1


@pytest.fixture
def full_disk():
    """A 64 KiB filesystem for uploaded files (needs root to mount a tmpfs)."""
    where = tempfile.mkdtemp(prefix="full-disk-")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", where], capture_output=True
    )
    if mounted.returncode != 0:
        os.rmdir(where)
        pytest.skip("cannot mount a small filesystem here (needs root)")
    try:
        with override_settings(FILE_UPLOAD_TEMP_DIR=where, FILE_UPLOAD_MAX_MEMORY_SIZE=1024):
            yield where
    finally:
        gc.collect()
        subprocess.run(["umount", "--lazy", where], check=False)
        os.rmdir(where)


@pytest.mark.django_db
def test_a_full_disk_is_a_507_naming_the_cause(api, creator, setup, full_disk):
    rows = b"".join(b'{"id": "%d", "content": "%s"}\n' % (n, b"x" * 200) for n in range(2000))
    upload = SimpleUploadedFile("items.jsonl", rows)
    client = api(creator)
    client.raise_request_exception = False
    response = client.post(
        "/api/generation/jobs",
        {"file": upload, "config": '{"name": "Full", "team": "team-a"}'},
        format="multipart",
    )
    assert response.status_code == 507
    assert "no disk space left" in response.json()["detail"]
    assert os.listdir(full_disk) == []  # the half-written upload is gone
    assert not GenerationJob.objects.exists()
