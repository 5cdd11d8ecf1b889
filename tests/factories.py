from __future__ import annotations

from decimal import Decimal

import factory
from django.contrib.auth import get_user_model

from evalplatform.accounts.models import Membership, Team
from evalplatform.accounts.roles import Role
from evalplatform.prompts.models import PromptBlock, PromptTemplate, PromptVersion
from evalplatform.providers.models import LLMModel, ProviderConnection, ProviderKind


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.org")
    password = factory.PostGenerationMethodCall("set_password", "pw-Secret-123")

    @factory.post_generation
    def _save(obj, create, extracted, **kwargs):
        if create:
            obj.save()


class TeamFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Team

    name = factory.Sequence(lambda n: f"Team {n}")
    slug = factory.Sequence(lambda n: f"team-{n}")


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Membership

    user = factory.SubFactory(UserFactory)
    team = factory.SubFactory(TeamFactory)
    role = Role.VIEWER


class ConnectionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ProviderConnection

    team = factory.SubFactory(TeamFactory)
    name = factory.Sequence(lambda n: f"conn-{n}")
    kind = ProviderKind.MOCK


class LLMModelFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = LLMModel

    connection = factory.SubFactory(ConnectionFactory)
    model_id = factory.Sequence(lambda n: f"model-{n}")
    display_name = factory.LazyAttribute(lambda m: m.model_id.title())
    input_price_per_mtok = Decimal("1.00")
    output_price_per_mtok = Decimal("4.00")


class PromptTemplateFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = PromptTemplate

    team = factory.SubFactory(TeamFactory)
    name = factory.Sequence(lambda n: f"prompt-{n}")


def make_version(
    template: PromptTemplate, blocks: list[tuple[str, str]], **fields
) -> PromptVersion:
    number = template.versions.count() + 1
    version = PromptVersion.objects.create(template=template, number=number, **fields)
    for position, (title, body) in enumerate(blocks):
        PromptBlock.objects.create(version=version, position=position, title=title, body=body)
    return version
