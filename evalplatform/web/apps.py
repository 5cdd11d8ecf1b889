from django.apps import AppConfig


class WebConfig(AppConfig):
    name = "evalplatform.web"
    label = "web"
    verbose_name = "Web pages"
