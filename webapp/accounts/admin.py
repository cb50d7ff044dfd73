"""The admin shows no API token: DRF's token admin lists every user's key in clear.

Tokens are made, shown once and revoked on the account page and with `manage.py apitoken`.
"""

from __future__ import annotations

from django.contrib import admin
from rest_framework.authtoken.models import TokenProxy

if admin.site.is_registered(TokenProxy):
    admin.site.unregister(TokenProxy)
