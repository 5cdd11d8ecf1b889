from django.apps import AppConfig


class PromptsConfig(AppConfig):
    name = "evalplatform.prompts"
    label = "prompts"
    verbose_name = "Prompt engineering"
