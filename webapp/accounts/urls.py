from django.contrib.auth.views import LogoutView
from django.urls import path

from webapp.accounts.views import AccountView, LoginView

urlpatterns = [
    path("login/", LoginView.as_view(), name="login"),
    path("logout/", LogoutView.as_view(), name="logout"),
    path("", AccountView.as_view(), name="account"),
]
