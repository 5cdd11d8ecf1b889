from django.apps import AppConfig


class GenerationConfig(AppConfig):
    name = "generation"
