from django.apps import AppConfig


class CoreConfig(AppConfig):
    """Command-line entry points (lab, probe) over the engine and the lab."""

    name = "webapp.core"
    label = "core"
