"""`/api/v1/subscriptions/`: each user reads and changes their own subscriptions and those of
their teams (admins: everyone's). The webhook URL and secret are write-only: accepted, never
given back; a PATCH without them keeps them."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import Q, QuerySet
from rest_framework import serializers, viewsets
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.views import APIView

from webapp.accounts.models import Team
from webapp.accounts.roles import can_view, is_admin
from webapp.accounts.serializers import CredentialField
from webapp.core.parsers import PARSER_CLASSES
from webapp.notifications.models import Subscription
from webapp.notifications.services import subscription_save


class SubscriptionSerializer(serializers.ModelSerializer[Subscription]):
    """A subscription, a user's (`owner`) or a team's (`team`, given when made: email to each
    member, a webhook once); `url` and `secret` are write-only (a PATCH without them keeps
    them), `destination` shows the webhook's scheme and host only."""

    owner = serializers.CharField(
        source="owner.username", read_only=True, allow_null=True, help_text="null: a team's"
    )
    team = serializers.PrimaryKeyRelatedField[Team](
        queryset=Team.objects.all(),
        required=False,
        allow_null=True,
        help_text="a team you are in: its subscription (null or left out: yours); fixed once made",
    )
    # No default: a default is skipped in a PATCH's answer (DRF), null is not.
    team_name = serializers.CharField(source="team.name", read_only=True, allow_null=True)
    url = CredentialField(required=False, allow_blank=True, max_length=2000)
    secret = CredentialField(required=False, allow_blank=True, max_length=2000)
    destination = serializers.CharField(read_only=True)
    has_secret = serializers.SerializerMethodField()

    class Meta:
        model = Subscription
        fields = [
            "id",
            "owner",
            "team",
            "team_name",
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
                by=self.context["request"].user, values=values, subscription=self.instance
            )
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.message_dict) from None
        return self.instance


class OwnsSubscription(BasePermission):
    """Any role manages its own subscriptions and its teams'; admins everyone's."""

    def has_permission(self, request: Request, view: APIView) -> bool:
        return can_view(request.user)

    def has_object_permission(self, request: Request, view: APIView, obj: Any) -> bool:
        return bool(obj.managed_by(request.user))


class SubscriptionViewSet(viewsets.ModelViewSet):  # type: ignore[type-arg]
    serializer_class = SubscriptionSerializer
    permission_classes = [OwnsSubscription]
    parser_classes = PARSER_CLASSES
    queryset = Subscription.objects.select_related("owner", "team")

    def get_queryset(self) -> QuerySet[Subscription]:
        rows = super().get_queryset()
        if is_admin(self.request.user):
            return rows
        user_id = self.request.user.pk
        return rows.filter(Q(owner=user_id) | Q(team__memberships__user=user_id)).distinct()
