from django.contrib import admin

from webapp.sites.models import Endpoint, Site, TestFile, VantagePoint


class TestFileInline(admin.TabularInline):  # type: ignore[type-arg]
    model = TestFile
    extra = 0


@admin.register(Site)
class SiteAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["name", "tier", "storage_system", "location"]
    search_fields = ["name"]


@admin.register(Endpoint)
class EndpointAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["name", "site", "protocol", "role", "base_url", "enabled"]
    list_filter = ["protocol", "role", "enabled"]
    search_fields = ["name", "base_url"]
    inlines = [TestFileInline]


@admin.register(VantagePoint)
class VantagePointAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["name", "location"]
