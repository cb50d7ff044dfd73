"""Lab endpoints take the lab's own names: `lab-far-root` becomes `far-root`, as `lab status`
lists it (issue 11). Only endpoints of sites of tier "lab" named `lab-...`; a name already
taken is left as it is. Backwards: the prefix comes back."""

from __future__ import annotations

from typing import Any

from django.db import migrations

PREFIX = "lab-"


def forwards(apps: Any, schema_editor: Any) -> None:
    Endpoint = apps.get_model("sites", "Endpoint")
    taken = set(Endpoint.objects.values_list("name", flat=True))
    for endpoint in Endpoint.objects.filter(site__tier="lab", name__startswith=PREFIX):
        name = endpoint.name.removeprefix(PREFIX)
        if name not in taken:
            taken.add(name)
            endpoint.name = name
            endpoint.save(update_fields=["name"])


def backwards(apps: Any, schema_editor: Any) -> None:
    Endpoint = apps.get_model("sites", "Endpoint")
    taken = set(Endpoint.objects.values_list("name", flat=True))
    for endpoint in Endpoint.objects.filter(site__tier="lab").exclude(name__startswith=PREFIX):
        name = PREFIX + endpoint.name
        if name not in taken:
            endpoint.name = name
            endpoint.save(update_fields=["name"])


class Migration(migrations.Migration):
    dependencies = [("sites", "0005_worker_heartbeat")]
    operations = [migrations.RunPython(forwards, backwards)]
