from django.apps import AppConfig


class DemoConfig(AppConfig):
    """Demo and lab wiring: the lab's registration, the synthetic history, and the `lab`,
    `bootstrap` and `history` commands. At the top of the layers: it may import every app,
    and no app imports it."""

    name = "webapp.demo"
    label = "demo"
