from django.apps import AppConfig


class ArchiversConfig(AppConfig):
    """Archivers: where each finished run's JSON is pushed (HTTP, AMQP), and each push."""

    name = "webapp.archivers"
    label = "archivers"
    default_auto_field = "django.db.models.BigAutoField"
