from django.contrib.auth.views import LogoutView
from django.urls import path

from webapp.accounts.oidc import SsoAuthenticateView, SsoCallbackView
from webapp.accounts.passwords import (
    PasswordChangeView,
    PasswordResetCompleteView,
    PasswordResetConfirmView,
    PasswordResetSentView,
    PasswordResetView,
)
from webapp.accounts.views import (
    AccountView,
    LoginView,
    TeamDeleteView,
    TeamDetailView,
    TeamListView,
    TeamMemberRemoveView,
    UserChangeView,
    UserCreateView,
    UserListView,
)

urlpatterns = [
    path("login/", LoginView.as_view(), name="login"),
    path("logout/", LogoutView.as_view(), name="logout"),
    path("", AccountView.as_view(), name="account"),
    path("password/", PasswordChangeView.as_view(), name="password-change"),
    path("password/reset/", PasswordResetView.as_view(), name="password-reset"),
    path("password/reset/sent/", PasswordResetSentView.as_view(), name="password-reset-sent"),
    path(
        "password/reset/<uidb64>/<token>/",
        PasswordResetConfirmView.as_view(),
        name="password-reset-confirm",
    ),
    path(
        "password/reset/done/",
        PasswordResetCompleteView.as_view(),
        name="password-reset-complete",
    ),
    path("users/", UserListView.as_view(), name="users"),
    path("users/new/", UserCreateView.as_view(), name="user-create"),
    path("users/<int:pk>/role/", UserChangeView.as_view(change="role"), name="user-role"),
    path("users/<int:pk>/active/", UserChangeView.as_view(change="active"), name="user-active"),
    path("teams/", TeamListView.as_view(), name="teams"),
    path("teams/<int:pk>/", TeamDetailView.as_view(), name="team"),
    path("teams/<int:pk>/delete/", TeamDeleteView.as_view(), name="team-delete"),
    path(
        "teams/<int:pk>/members/<int:user_pk>/remove/",
        TeamMemberRemoveView.as_view(),
        name="team-member-remove",
    ),
    # Register https://HOST/accounts/oidc/callback/ as the redirect URI at the provider.
    path("oidc/authenticate/", SsoAuthenticateView.as_view(), name="oidc-authenticate"),
    path("oidc/callback/", SsoCallbackView.as_view(), name="oidc-callback"),
]
