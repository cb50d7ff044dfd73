"""What every page needs to know about the user: the role, and so which actions to show."""

from __future__ import annotations

from django.http import HttpRequest

from webapp.accounts.roles import ADMIN, OPERATOR, user_role


def role(request: HttpRequest) -> dict[str, object]:
    current = user_role(getattr(request, "user", None))
    return {
        "role": current,
        "can_operate": current in (OPERATOR, ADMIN),
        "is_admin": current == ADMIN,
    }
