from django.apps import AppConfig


class AccountsConfig(AppConfig):
    """Roles (viewer, operator, admin), API tokens, login, and credential encryption."""

    name = "webapp.accounts"
    label = "accounts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from rest_framework.serializers import ModelSerializer

        from webapp.accounts.crypto import EncryptedTextField
        from webapp.accounts.serializers import CredentialField

        # Credentials stay out of API output even in a serializer with fields = "__all__".
        ModelSerializer.serializer_field_mapping[EncryptedTextField] = CredentialField
