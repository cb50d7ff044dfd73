"""Dashboard pages. Each page's module holds its selector, its page view and its API view."""

from django.urls import URLPattern, URLResolver

app_name = "dashboards"

urlpatterns: list[URLPattern | URLResolver] = []
