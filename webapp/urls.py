from django.contrib import admin
from django.urls import URLPattern, URLResolver, include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from webapp.accounts.views import admin_login
from webapp.api.metrics import metrics_view
from webapp.campaigns.urls import sites_pages
from webapp.core.views import (
    favicon,
    healthz,
    page_not_found,
    permission_denied,
    server_error,
)
from webapp.dashboards.urls import site_pages
from webapp.dashboards.views import HomeView
from webapp.sites import urls as sites_urls

# The sites namespace also holds a page that shows campaign data (campaigns/site_pages.py)
# and the site and endpoint pages, dashboards: apps import downward only (docs/architecture.md).
sites_namespace = [*sites_urls.urlpatterns, *sites_pages, *site_pages]

urlpatterns: list[URLPattern | URLResolver] = [
    path("", HomeView.as_view(), name="home"),
    path("healthz", healthz, name="healthz"),
    path("favicon.ico", favicon),
    # For Prometheus, with a scrape token or from allowed networks (docs/monitoring.md).
    path("metrics", metrics_view, name="metrics"),
    path("", include((sites_namespace, sites_urls.app_name))),
    path("", include("webapp.campaigns.urls")),
    path("", include("webapp.dashboards.urls")),
    path("", include("webapp.notifications.urls")),
    # Before the admin's own URLs: its login form is throttled like /accounts/login/.
    path("admin/login/", admin_login),
    path("admin/", admin.site.urls),
    path("accounts/", include("webapp.accounts.urls")),
    path("api/v1/", include("webapp.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    # The split view serves Swagger UI's start-up script as a file: no inline script (CSP).
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="schema"), name="api-docs"),
]

handler403 = permission_denied
handler404 = page_not_found
handler500 = server_error
