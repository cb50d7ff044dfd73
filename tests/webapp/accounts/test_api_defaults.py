"""REST_FRAMEWORK defaults through the whole stack: auth, CSRF, write throttle, pagination."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.urls import path
from rest_framework import generics, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.test import APIClient
from rest_framework.views import APIView

from webapp.accounts.services import api_token_create, user_set_role
from webapp.sites.models import Site

WRITE_RATE = 120  # FEDPROBE_THROTTLE_WRITES's default, per minute

pytestmark = [pytest.mark.django_db, pytest.mark.urls(__name__)]


class SiteSerializer(serializers.ModelSerializer):
    class Meta:
        model = Site
        fields = ("id", "name")


class Sites(generics.ListAPIView):
    queryset = Site.objects.order_by("id")
    serializer_class = SiteSerializer


class Echo(APIView):
    def get(self, request: Request) -> Response:
        return Response({"user": request.user.username})

    post = get


urlpatterns = [path("sites/", Sites.as_view()), path("echo/", Echo.as_view())]


def user_with(role: str) -> User:
    user = User.objects.create_user(f"{role}-{User.objects.count()}", password="pw")
    user_set_role(user=user, role=role)
    return user


def token_client(user: User) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=user)}")
    return client


def test_anonymous_request_gets_401_and_nothing_else() -> None:
    response = APIClient().get("/sites/")
    assert response.status_code == 401
    assert "results" not in response.json()


def test_session_write_needs_the_csrf_token() -> None:
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(user_with("operator"))
    assert client.get("/echo/").status_code == 200
    response = client.post("/echo/")
    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]


def test_token_write_needs_no_csrf_token() -> None:
    client = token_client(user_with("operator"))
    client.handler.enforce_csrf_checks = True
    assert client.post("/echo/").status_code == 200


def test_writes_beyond_the_rate_are_throttled_per_user() -> None:
    client = token_client(user_with("operator"))
    statuses = [client.post("/echo/").status_code for _ in range(WRITE_RATE + 1)]
    assert statuses[:WRITE_RATE] == [200] * WRITE_RATE
    assert statuses[-1] == 429
    assert token_client(user_with("operator")).post("/echo/").status_code == 200


def test_reads_are_not_throttled() -> None:
    client = token_client(user_with("viewer"))
    statuses = {client.get("/echo/").status_code for _ in range(WRITE_RATE + 10)}
    assert statuses == {200}


def test_list_is_paged_by_50_with_limit_and_offset() -> None:
    Site.objects.bulk_create(Site(name=f"site-{n:03}") for n in range(120))
    body = token_client(user_with("viewer")).get("/sites/").json()
    assert (body["count"], len(body["results"])) == (120, 50)
    assert body["next"].endswith("/sites/?limit=50&offset=50")
    page = token_client(user_with("viewer")).get("/sites/?limit=10&offset=110").json()
    assert [site["name"] for site in page["results"]] == [f"site-{n}" for n in range(110, 120)]


def test_limit_is_capped_at_500() -> None:
    Site.objects.bulk_create(Site(name=f"site-{n:03}") for n in range(600))
    body = token_client(user_with("viewer")).get("/sites/?limit=10000").json()
    assert (body["count"], len(body["results"])) == (600, 500)
