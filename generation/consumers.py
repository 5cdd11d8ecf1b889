"""A job's live events, for users who may view the job: ``ws/generation/jobs/<id>`` (plain
WebSocket) and the ``job`` topic of the Socket.IO endpoint (``evalplatform.routing``)."""

from __future__ import annotations

from typing import Any

from evalplatform.accounts import policy
from evalplatform.accounts.roles import GENERATION_VIEW
from evalplatform.live.consumers import LiveConsumer
from evalplatform.live.watch import Topic
from generation import events
from generation.models import GenerationJob


def job_authorize(user: Any, job_id: int) -> str:
    job = policy.access(
        user, GENERATION_VIEW, GenerationJob.objects.filter(writing=False), pk=job_id
    )
    return events.group(job.pk)


JOB_TOPIC = Topic(authorize=job_authorize, snapshot=events.snapshot)


class JobConsumer(LiveConsumer):
    topic = JOB_TOPIC
    url_kwarg = "job_id"
