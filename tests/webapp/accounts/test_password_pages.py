"""Passwords in the pages: a user changes theirs from the account page, and a forgotten one
is reset by a link mailed through a real SMTP server (aiosmtpd) to the account's address.
A user who signs in through the single sign-on has none here, and the pages say so."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from tests.webapp.notifications.conftest import SmtpReceiver
from webapp.accounts.services import sso_user_sign_in, user_create

pytestmark = pytest.mark.django_db

OLD, NEW = "an-old-pass-phrase-17", "a-new-pass-phrase-42"


@pytest.fixture(autouse=True)
def fast_hashing(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def mailbox(settings: Any) -> Iterator[SmtpReceiver]:
    receiver = SmtpReceiver().start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", receiver.port
    settings.FEDPROBE_BASE_URL = "https://fedprobe.example.org"
    yield receiver
    receiver.stop()


def test_a_user_changes_their_password_from_the_account_page(client: Client) -> None:
    user = user_create(username="ada", role="viewer", email="", password=OLD)
    client.force_login(user)
    assert 'href="/accounts/password/"' in client.get("/accounts/").content.decode()
    wrong = client.post(
        "/accounts/password/",
        {"old_password": "guess", "new_password1": NEW, "new_password2": NEW},
    )
    assert wrong.status_code == 200 and "old_password" in wrong.context["form"].errors
    changed = client.post(
        "/accounts/password/",
        {"old_password": OLD, "new_password1": NEW, "new_password2": NEW},
        follow=True,
    )
    assert changed.redirect_chain == [("/accounts/", 302)]
    assert "Your password was changed." in changed.content.decode()  # still signed in
    user.refresh_from_db()
    assert user.check_password(NEW)


def test_a_forgotten_password_is_reset_by_a_mailed_link_that_works_once(
    client: Client, mailbox: SmtpReceiver
) -> None:
    user_create(username="ada", role="viewer", email="ada@example.org", password=OLD)
    assert 'href="/accounts/password/reset/"' in client.get("/accounts/login/").content.decode()
    asked = client.post("/accounts/password/reset/", {"email": "ada@example.org"}, follow=True)
    assert asked.redirect_chain == [("/accounts/password/reset/sent/", 302)]
    (mail,) = mailbox.messages
    assert mail["To"] == "ada@example.org" and "reset your password" in mail["Subject"]
    body = mail.get_payload(decode=True).decode()
    link = re.search(r"https://fedprobe\.example\.org(/accounts/password/reset/\S+/)", body)
    assert link, body

    form = client.get(link.group(1), follow=True)
    assert form.context["validlink"]
    done = client.post(
        form.redirect_chain[-1][0], {"new_password1": NEW, "new_password2": NEW}, follow=True
    )
    assert done.redirect_chain[-1][0] == "/accounts/password/reset/done/"
    assert client.login(username="ada", password=NEW)
    again = Client().get(link.group(1), follow=True)
    assert not again.context["validlink"] and "not valid any more" in again.content.decode()


def test_a_single_sign_on_user_is_told_there_is_no_password_here(
    client: Client, mailbox: SmtpReceiver, settings: Any
) -> None:
    settings.FEDPROBE_OIDC_ISSUER = "https://sso.example.org"
    settings.FEDPROBE_OIDC_NAME = "CERN SSO"
    user = sso_user_sign_in(
        issuer="https://sso.example.org",
        subject="a1",
        username="bob",
        email="bob@example.org",
        role="viewer",
        provider="CERN SSO",
    )
    client.force_login(user)
    account = client.get("/accounts/").content.decode()
    assert "You sign in with CERN SSO: fedprobe keeps no password for you." in account
    assert "/accounts/password/" not in account
    page = client.get("/accounts/password/").content.decode()
    assert "You sign in with CERN SSO" in page and "old_password" not in page
    refused = client.post(
        "/accounts/password/",
        {"old_password": "", "new_password1": NEW, "new_password2": NEW},
    )
    assert refused.status_code == 200
    client.logout()
    client.post("/accounts/password/reset/", {"email": "bob@example.org"})
    assert mailbox.messages == []
    assert not User.objects.get(username="bob").has_usable_password()
