"""Single sign-on through a real OpenID Connect provider (tests/oidc_provider.py) on loopback.

The browser's path is walked with Django's test client for fedprobe and real HTTP for the
provider: fedprobe's redirect to the provider's authorize endpoint, the provider's redirect
back to the callback, and the callback's own requests to the provider's token, JWKS and
userinfo endpoints.
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
import requests
from cryptography.hazmat.primitives.asymmetric import rsa
from django.contrib.auth.models import User
from django.contrib.messages import get_messages
from django.http import HttpResponse
from django.test import Client
from pytest_django.fixtures import Settings

from tests.oidc_provider import OidcProvider
from webapp.accounts.models import SsoIdentity
from webapp.accounts.oidc import forget_provider_configuration
from webapp.accounts.roles import user_role
from webapp.accounts.services import user_create, user_set_active

pytestmark = pytest.mark.django_db

CLIENT_ID = "fedprobe-test"
CLIENT_SECRET = "not-a-real-secret-3b1f"


@pytest.fixture
def provider(settings: Settings) -> Iterator[OidcProvider]:
    with OidcProvider(client_id=CLIENT_ID, client_secret=CLIENT_SECRET) as running:
        running.user = {
            "sub": "a1b2-c3",
            "preferred_username": "alice",
            "email": "alice@example.org",
            "groups": ["cms", "fedprobe-operators"],
        }
        settings.FEDPROBE_OIDC_ISSUER = running.issuer
        settings.FEDPROBE_OIDC_NAME = "Test IAM"
        settings.OIDC_RP_CLIENT_ID = CLIENT_ID
        settings.OIDC_RP_CLIENT_SECRET = CLIENT_SECRET
        settings.FEDPROBE_OIDC_ROLE_MAP = {
            "fedprobe-operators": "operator",
            "fedprobe-admins": "admin",
        }
        settings.FEDPROBE_OIDC_DEFAULT_ROLE = "viewer"
        forget_provider_configuration()
        yield running
    forget_provider_configuration()


def to_provider(client: Client, next_url: str = "/") -> str:
    """fedprobe's redirect to the provider's authorize endpoint."""
    response = client.get("/accounts/oidc/authenticate/", {"next": next_url})
    assert response.status_code == 302
    return response.headers["Location"]


def from_provider(authorize_url: str) -> str:
    """What the provider sends the browser back to: the callback path with code and state."""
    answer = requests.get(authorize_url, allow_redirects=False, timeout=10)
    assert answer.status_code == 302, answer.text
    back = urlsplit(answer.headers["Location"])
    assert back.netloc == "testserver"
    return f"{back.path}?{back.query}"


def sign_in(client: Client, next_url: str = "/") -> HttpResponse:
    return client.get(from_provider(to_provider(client, next_url)))  # type: ignore[return-value]


def signed_in(client: Client) -> User | None:
    user_id = client.session.get("_auth_user_id")
    return User.objects.get(pk=user_id) if user_id else None


def refusal(client: Client, response: HttpResponse) -> str:
    assert (response.status_code, response.headers["Location"]) == (302, "/accounts/login/")
    page = client.get("/accounts/login/").content.decode()
    return page


def test_login_page_offers_the_provider_only_when_configured(
    client: Client, settings: Settings
) -> None:
    settings.FEDPROBE_OIDC_ISSUER = ""
    assert b"Sign in with" not in client.get("/accounts/login/").content
    assert client.get("/accounts/oidc/authenticate/").status_code == 404
    assert client.get("/accounts/oidc/callback/?code=x&state=y").status_code == 404
    settings.FEDPROBE_OIDC_ISSUER = "https://iam.example.org"
    settings.FEDPROBE_OIDC_NAME = "INDIGO IAM"
    page = client.get("/accounts/login/?next=/runs/").content.decode()
    assert "Sign in with INDIGO IAM" in page
    assert 'href="/accounts/oidc/authenticate/?next=/runs/"' in page


def test_first_sign_in_creates_the_user_with_the_role_of_their_groups(
    client: Client, provider: OidcProvider
) -> None:
    authorize = to_provider(client, "/runs/")
    query = parse_qs(urlsplit(authorize).query)
    assert authorize.startswith(f"{provider.issuer}/authorize?")
    assert query["redirect_uri"] == ["http://testserver/accounts/oidc/callback/"]
    assert query["scope"] == ["openid profile email"]
    assert query["code_challenge_method"] == ["S256"]
    assert query["nonce"] and query["state"]

    response = client.get(from_provider(authorize))

    assert (response.status_code, response.headers["Location"]) == (302, "/runs/")
    alice = User.objects.get(username="alice")
    assert signed_in(client) == alice
    assert user_role(alice) == "operator"
    assert alice.email == "alice@example.org"
    assert not alice.has_usable_password()
    identity = SsoIdentity.objects.get(user=alice)
    assert (identity.issuer, identity.subject) == (provider.issuer, "a1b2-c3")
    assert client.get("/").status_code == 200


def test_the_highest_mapped_role_wins_and_unmapped_users_get_the_default(
    client: Client, provider: OidcProvider, settings: Settings
) -> None:
    provider.user["groups"] = ["fedprobe-operators", "fedprobe-admins"]
    sign_in(client)
    assert user_role(User.objects.get(username="alice")) == "admin"

    provider.user = {"sub": "b2", "preferred_username": "bob", "groups": ["cms"]}
    sign_in(Client())
    assert user_role(User.objects.get(username="bob")) == "viewer"


def test_a_later_sign_in_finds_the_user_by_subject_and_keeps_the_role_set_here(
    client: Client, provider: OidcProvider
) -> None:
    sign_in(client)
    alice = User.objects.get(username="alice")
    from webapp.accounts.services import user_change_role

    user_change_role(user=alice, role="viewer")
    provider.user["preferred_username"] = "alice.renamed"
    again = Client()
    sign_in(again)
    assert signed_in(again) == alice
    assert user_role(alice) == "viewer"
    assert User.objects.count() == 1


def test_default_role_none_refuses_users_outside_the_mapped_groups(
    client: Client, provider: OidcProvider, settings: Settings
) -> None:
    settings.FEDPROBE_OIDC_DEFAULT_ROLE = "none"
    provider.user["groups"] = ["cms"]
    page = refusal(client, sign_in(client))
    assert "Signing in with Test IAM failed" in page
    assert "none of the groups that give a fedprobe role" in page
    assert signed_in(client) is None
    assert not User.objects.filter(username="alice").exists()


def test_a_deactivated_user_cannot_sign_in_through_the_provider(
    client: Client, provider: OidcProvider
) -> None:
    sign_in(client)
    alice = User.objects.get(username="alice")
    user_set_active(user=alice, active=False)
    other = Client()
    page = refusal(other, sign_in(other))
    assert "your fedprobe account &#x27;alice&#x27; is deactivated" in page
    assert signed_in(other) is None


def test_deactivating_a_signed_in_user_ends_their_session(
    client: Client, provider: OidcProvider
) -> None:
    sign_in(client)
    assert client.get("/").status_code == 200
    user_set_active(user=User.objects.get(username="alice"), active=False)
    response = client.get("/")
    assert (response.status_code, response.headers["Location"]) == (302, "/accounts/login/?next=/")


def test_an_account_made_for_sso_is_taken_over_by_the_first_sign_in(
    client: Client, provider: OidcProvider
) -> None:
    made = user_create(username="alice", role="admin", password=None)
    sign_in(client)
    assert signed_in(client) == made
    assert user_role(made) == "admin"  # the admin's choice, not the groups'
    assert SsoIdentity.objects.get().user == made


def test_an_account_with_a_password_is_not_taken_over(
    client: Client, provider: OidcProvider
) -> None:
    User.objects.create_user("alice", password="a local password 8x")
    page = refusal(client, sign_in(client))
    assert "a fedprobe account named &#x27;alice&#x27; exists already" in page
    assert signed_in(client) is None
    assert not SsoIdentity.objects.exists()


@pytest.mark.parametrize(
    ("misbehaviour", "value"),
    [
        ("signing_key", "other key"),
        ("id_token_issuer", "https://evil.example.org"),
        ("id_token_audience", "another-client"),
        ("id_token_nonce", "not-the-sessions-nonce"),
    ],
)
def test_an_id_token_not_signed_by_the_provider_for_us_is_refused(
    client: Client, provider: OidcProvider, misbehaviour: str, value: str
) -> None:
    if misbehaviour == "signing_key":
        setattr(provider, misbehaviour, rsa.generate_private_key(65537, 2048))
    else:
        setattr(provider, misbehaviour, value)
    page = refusal(client, sign_in(client))
    assert "Signing in with Test IAM failed: its answer could not be verified" in page
    assert provider.token_requests == 1
    assert signed_in(client) is None
    assert not User.objects.exists()


def test_a_callback_with_a_tampered_state_is_refused(
    client: Client, provider: OidcProvider
) -> None:
    back = urlsplit(from_provider(to_provider(client)))
    query = {name: values[0] for name, values in parse_qs(back.query).items()}
    query["state"] = "forged" + query["state"]
    response = client.get(f"{back.path}?{urlencode(query)}")
    refusal(client, response)
    assert provider.token_requests == 0
    assert signed_in(client) is None


def test_a_callback_from_another_browser_is_refused(client: Client, provider: OidcProvider) -> None:
    """Login CSRF: an attacker's code and state, sent to a victim's browser."""
    callback = from_provider(to_provider(Client()))
    refusal(client, client.get(callback))
    assert provider.token_requests == 0
    assert signed_in(client) is None


def test_a_callback_is_good_once(client: Client, provider: OidcProvider) -> None:
    callback = from_provider(to_provider(client))
    client.get(callback)
    assert signed_in(client) is not None
    client.logout()
    refusal(client, client.get(callback))
    assert signed_in(client) is None


def test_the_provider_saying_no_is_told_to_the_user(client: Client, provider: OidcProvider) -> None:
    to_provider(client)
    response = client.get("/accounts/oidc/callback/?error=access_denied&state=x")
    assert "Signing in with Test IAM failed: it answered access_denied" in refusal(client, response)


def test_an_unreachable_provider_is_told_to_the_user(
    client: Client, provider: OidcProvider, settings: Settings
) -> None:
    settings.FEDPROBE_OIDC_ISSUER = "http://127.0.0.1:9"
    response = client.get("/accounts/oidc/authenticate/")
    assert (response.status_code, response.headers["Location"]) == (302, "/accounts/login/")
    messages = [str(message) for message in get_messages(response.wsgi_request)]
    assert messages == ["Test IAM cannot be reached: try again later, or log in with a password."]


def test_the_login_form_never_runs_the_code_flow(client: Client, provider: OidcProvider) -> None:
    code_and_state = urlsplit(from_provider(to_provider(Client()))).query
    client.post(f"/accounts/login/?{code_and_state}", {"username": "", "password": ""})
    assert provider.token_requests == 0
    assert signed_in(client) is None
