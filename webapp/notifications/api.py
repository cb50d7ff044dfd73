"""`/api/v1/subscriptions/`: each user reads and changes their own subscriptions (admins:
everyone's). The webhook URL and secret are write-only: accepted, never given back."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import QuerySet
from rest_framework import serializers, viewsets
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.views import APIView

from webapp.accounts.roles import can_view, is_admin
from webapp.accounts.serializers import CredentialField
from webapp.core.parsers import PARSER_CLASSES
from webapp.notifications.models import Subscription
from webapp.notifications.services import subscription_save


class SubscriptionSerializer(serializers.ModelSerializer[Subscription]):
    """A subscription; `url` and `secret` are write-only (a PATCH without them keeps them),
    `destination` shows the webhook's scheme and host only."""

    owner = serializers.CharField(source="owner.username", read_only=True)
    url = CredentialField(required=False, allow_blank=True, max_length=2000)
    secret = CredentialField(required=False, allow_blank=True, max_length=2000)
    destination = serializers.CharField(read_only=True)
    has_secret = serializers.SerializerMethodField()

    class Meta:
        model = Subscription
        fields = [
            "id",
            "owner",
            "channel",
            "format",
            "target",
            "target_id",
            "digest",
            "email",
            "url",
            "destination",
            "secret_header",
            "secret",
            "has_secret",
            "active",
            "created_at",
        ]
        read_only_fields = ["id", "owner", "created_at"]
        extra_kwargs = {"email": {"required": False}}

    def get_has_secret(self, subscription: Subscription) -> bool:
        return bool(subscription.secret)

    def save(self, **kwargs: Any) -> Subscription:
        values = {**self.validated_data, **kwargs}
        try:
            self.instance = subscription_save(
                owner=self.context["request"].user, values=values, subscription=self.instance
            )
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.message_dict) from None
        return self.instance


class OwnsSubscription(BasePermission):
    """Any role manages its own subscriptions; admins everyone's."""

    def has_permission(self, request: Request, view: APIView) -> bool:
        return can_view(request.user)

    def has_object_permission(self, request: Request, view: APIView, obj: Any) -> bool:
        return bool(obj.owner_id == request.user.pk or is_admin(request.user))


class SubscriptionViewSet(viewsets.ModelViewSet):  # type: ignore[type-arg]
    serializer_class = SubscriptionSerializer
    permission_classes = [OwnsSubscription]
    parser_classes = PARSER_CLASSES
    queryset = Subscription.objects.select_related("owner")

    def get_queryset(self) -> QuerySet[Subscription]:
        rows = super().get_queryset()
        return rows if is_admin(self.request.user) else rows.filter(owner=self.request.user.pk)
