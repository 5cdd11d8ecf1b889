"""``ws/generation/jobs/<id>``: a job's live events, for users who may view the job."""

from __future__ import annotations

from typing import Any

from evalplatform.accounts import policy
from evalplatform.accounts.roles import GENERATION_VIEW
from evalplatform.live.consumers import LiveConsumer
from generation import events
from generation.models import GenerationJob


class JobConsumer(LiveConsumer):
    job_id: int

    def authorize(self, user: Any, **kwargs: Any) -> str:
        job = policy.access(user, GENERATION_VIEW, GenerationJob.objects.all(), pk=kwargs["job_id"])
        self.job_id = job.pk
        return events.group(job.pk)

    def snapshot(self) -> dict[str, Any]:
        return events.snapshot(self.job_id)
