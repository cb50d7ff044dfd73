"""Workflows on users: accounts, roles, single sign-on and API tokens."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, User
from django.contrib.auth.password_validation import validate_password
from django.contrib.auth.validators import UnicodeUsernameValidator
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet

from webapp.accounts.models import (
    PREFIX_LENGTH,
    ApiToken,
    SsoIdentity,
    Team,
    TeamMembership,
    api_key_digest,
    new_api_key,
)
from webapp.accounts.roles import ADMIN, ROLES, can_operate, can_view


def user_set_role(*, user: User, role: str) -> None:
    """Give `user` exactly one role: the groups of the other roles are left."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}: choose one of {', '.join(ROLES)}")
    with transaction.atomic():
        user.groups.remove(*Group.objects.filter(name__in=ROLES).exclude(name=role))
        user.groups.add(Group.objects.get(name=role))


class UserInputError(ValueError):
    """Input a user workflow refuses; `field` names what is wrong, and nothing was changed."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def _check_role(role: str) -> None:
    if role not in ROLES:
        raise UserInputError("role", f"unknown role {role!r}: choose one of {', '.join(ROLES)}")


def _check_username(username: str) -> None:
    if not username:
        raise UserInputError("username", "give a user name")
    try:
        UnicodeUsernameValidator()(username)
    except ValidationError:
        raise UserInputError(
            "username", f"{username!r} may hold only letters, digits and @ . + - _"
        ) from None
    if len(username) > 150:
        raise UserInputError("username", "at most 150 characters")
    if get_user_model().objects.filter(username__iexact=username).exists():
        raise UserInputError("username", f"a user named {username!r} exists already")


def user_create(*, username: str, role: str, email: str = "", password: str | None) -> User:
    """A new active user with `role`; without a password (None) the user signs in through
    single sign-on only (or uses an API token)."""
    _check_username(username)
    _check_role(role)
    if email:
        try:
            validate_email(email)
        except ValidationError:
            raise UserInputError("email", f"{email!r} is not an email address") from None
    if password is not None:
        try:
            validate_password(password, get_user_model()(username=username, email=email))
        except ValidationError as weak:
            raise UserInputError("password", " ".join(weak.messages)) from None
    with transaction.atomic():
        user = get_user_model().objects.create_user(username, email=email, password=password)
        user_set_role(user=user, role=role)
    return user


class LastAdmin(UserInputError):
    """The change would leave no active admin."""


def _refuse_last_admin(*, user: User, field: str) -> None:
    """Refuse to take the admin role from `user` when no other active admin is left.

    Called inside the changing transaction: locking the admin group row serialises such
    changes, so two admins demoting each other at once cannot both succeed.
    """
    Group.objects.select_for_update().get(name=ADMIN)
    admins = get_user_model().objects.filter(
        Q(is_superuser=True) | Q(groups__name=ADMIN), is_active=True
    )
    if not admins.filter(pk=user.pk).exists():
        return
    if not admins.exclude(pk=user.pk).exists():
        raise LastAdmin(
            field,
            f"{user.get_username()} is the last active admin: make another user admin first",
        )


def user_change_role(*, user: User, role: str) -> None:
    """Give `user` exactly `role`: a superuser given another role stops being one."""
    _check_role(role)
    with transaction.atomic():
        if role != ADMIN:
            _refuse_last_admin(user=user, field="role")
            if user.is_superuser or user.is_staff:
                user.is_superuser = user.is_staff = False
                user.save(update_fields=["is_superuser", "is_staff"])
        user_set_role(user=user, role=role)


def user_set_active(*, user: User, active: bool) -> None:
    """Deactivate (no sign-in, no API token, no role) or reactivate a user; users are never
    deleted: runs and campaigns refer to them."""
    with transaction.atomic():
        if not active:
            _refuse_last_admin(user=user, field="active")
        user.is_active = active
        user.save(update_fields=["is_active"])


class SignInRefused(Exception):
    """A single sign-on that fedprobe refuses: the message tells the user why."""


def sso_user_sign_in(
    *,
    issuer: str,
    subject: str,
    username: str,
    email: str,
    role: str | None,
    provider: str,
) -> User:
    """The user a provider's identity signs in as, made on the first sign-in with `role`.

    The identity (issuer, subject) is what is matched, never an email address. A first
    sign-in takes over an account an admin made for it (the same user name, no password,
    no identity yet); any other account of that name is refused, as is a deactivated user
    or, for a new user, no role.
    """
    identity = (
        SsoIdentity.objects.select_related("user").filter(issuer=issuer, subject=subject).first()
    )
    if identity is not None:
        user = identity.user
    else:
        user = _sso_first_sign_in(
            issuer=issuer,
            subject=subject,
            username=username,
            email=email,
            role=role,
            provider=provider,
        )
    if not user.is_active:
        raise SignInRefused(
            f"your fedprobe account {user.get_username()!r} is deactivated: ask an admin"
        )
    return user


def _sso_first_sign_in(
    *, issuer: str, subject: str, username: str, email: str, role: str | None, provider: str
) -> User:
    users = get_user_model().objects
    with transaction.atomic():
        user = users.select_for_update().filter(username__iexact=username).first()
        if user is not None:
            if user.has_usable_password() or user.sso_identities.exists():
                raise SignInRefused(
                    f"a fedprobe account named {username!r} exists already and was not made "
                    f"for {provider}: ask an admin"
                )
        elif role is None:
            raise SignInRefused(
                f"your {provider} account is in none of the groups that give a fedprobe "
                "role: ask an admin for one"
            )
        else:
            try:
                user = user_create(username=username, role=role, email=email, password=None)
            except UserInputError as bad:
                raise SignInRefused(f"{provider}'s {bad.field} is refused: {bad.message}") from None
        SsoIdentity.objects.create(user=user, issuer=issuer, subject=subject)
    return user


class ApiTokenExists(Exception):
    """The user has a token already: its key cannot be shown again, only replaced."""


def api_token_exists(*, user: User) -> bool:
    return ApiToken.objects.filter(user=user).exists()


def api_token_revoke(*, user: User) -> None:
    ApiToken.objects.filter(user=user).delete()


def api_token_create(*, user: User) -> str:
    """A token for `user`, who has none: its key, which only its digest is kept of."""
    key = new_api_key()
    try:
        with transaction.atomic():
            ApiToken.objects.create(
                user=user, prefix=key[:PREFIX_LENGTH], digest=api_key_digest(key)
            )
    except IntegrityError as exists:
        raise ApiTokenExists(f"{user.get_username()} has an API token already") from exists
    return key


def api_token_rotate(*, user: User) -> str:
    """A new token for `user`; the old one stops working."""
    with transaction.atomic():
        api_token_revoke(user=user)
        return api_token_create(user=user)


# Teams: made by operators and admins (who then manage them); changed by their managers and
# admins. PermissionDenied says who may; UserInputError names the bad field.


def _check_team_name(name: str, *, team: Team | None = None) -> str:
    name = name.strip()
    if not name:
        raise UserInputError("name", "give the team a name")
    if len(name) > 100:
        raise UserInputError("name", "at most 100 characters")
    taken = Team.objects.filter(name__iexact=name)
    if team is not None:
        taken = taken.exclude(pk=team.pk)
    if taken.exists():
        raise UserInputError("name", f"a team named {name!r} exists already")
    return name


def _check_description(description: str) -> str:
    if len(description) > 300:
        raise UserInputError("description", "at most 300 characters")
    return description.strip()


def _refuse_unless_manager(*, team: Team, by: User, doing: str) -> None:
    if not team.managed_by(by):
        raise PermissionDenied(f"{doing} needs a manager of team {team.name} or an admin")


def team_create(*, name: str, description: str = "", by: User) -> Team:
    """A new team, managed by `by` (an operator or admin), its first member."""
    if not can_operate(by):
        raise PermissionDenied("creating teams needs the operator role")
    name = _check_team_name(name)
    description = _check_description(description)
    try:
        with transaction.atomic():
            team = Team.objects.create(name=name, description=description)
            TeamMembership.objects.create(team=team, user=by, manager=True)
    except IntegrityError:  # made by someone else meanwhile
        raise UserInputError("name", f"a team named {name!r} exists already") from None
    return team


def team_change(
    *, team: Team, by: User, name: str | None = None, description: str | None = None
) -> Team:
    """Rename the team or change its description (None: kept)."""
    _refuse_unless_manager(team=team, by=by, doing="changing a team")
    if name is not None:
        team.name = _check_team_name(name, team=team)
    if description is not None:
        team.description = _check_description(description)
    try:
        with transaction.atomic():
            team.save(update_fields=["name", "description"])
    except IntegrityError:
        raise UserInputError("name", f"a team named {team.name!r} exists already") from None
    return team


def team_delete(*, team: Team, by: User) -> None:
    """Delete the team, and with it what was shared with it (its subscriptions)."""
    _refuse_unless_manager(team=team, by=by, doing="deleting a team")
    team.delete()


def team_member_add(
    *, team: Team, by: User, username: str, manager: bool = False
) -> TeamMembership:
    """Put the user named `username` in the team, as a manager or not; a member already in it
    is made (or no longer) a manager."""
    _refuse_unless_manager(team=team, by=by, doing="changing a team's members")
    user = get_user_model().objects.filter(username__iexact=username.strip()).first()
    if user is None:
        raise UserInputError("username", f"no user is named {username.strip()!r}")
    if not user.is_active:
        raise UserInputError("username", f"{user.get_username()} is deactivated")
    with transaction.atomic():
        rows = _locked_memberships(team)
        membership = rows.filter(user=user).first()
        if membership is None:
            return TeamMembership.objects.create(team=team, user=user, manager=manager)
        if membership.manager and not manager:
            _refuse_last_manager(rows, user=user, field="manager")
        membership.manager = manager
        membership.save(update_fields=["manager"])
    return membership


def team_member_remove(*, team: Team, by: User, user: User) -> None:
    """Take `user` out of the team (a manager or admin does; any member may leave): what the
    team is subscribed to is no longer sent to them, from this moment."""
    if by.pk != user.pk or not can_view(by):
        _refuse_unless_manager(team=team, by=by, doing="changing a team's members")
    with transaction.atomic():
        rows = _locked_memberships(team)
        membership = rows.filter(user=user).first()
        if membership is None:
            raise UserInputError("username", f"{user.get_username()} is not in team {team.name}")
        if membership.manager:
            _refuse_last_manager(rows, user=user, field="username")
        membership.delete()


def _locked_memberships(team: Team) -> QuerySet[TeamMembership]:
    """The team's memberships, locked (with the team row) until the transaction ends: two
    managers removing each other at once cannot both succeed."""
    Team.objects.select_for_update().get(pk=team.pk)
    return TeamMembership.objects.filter(team=team)


def _refuse_last_manager(rows: QuerySet[TeamMembership], *, user: User, field: str) -> None:
    if not rows.filter(manager=True, user__is_active=True).exclude(user=user).exists():
        raise UserInputError(
            field,
            f"{user.get_username()} is the team's last manager: make another member manager first",
        )
