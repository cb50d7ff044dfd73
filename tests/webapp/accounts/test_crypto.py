"""Credential encryption: keys, the local key file, and EncryptedTextField on a real table."""

from __future__ import annotations

import stat
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django import forms
from django.core.exceptions import FieldError, ImproperlyConfigured
from django.db import connection, models
from django.test.utils import isolate_apps
from pytest_django.fixtures import Settings
from rest_framework import serializers

from webapp.accounts.crypto import (
    KEY_FILE_NAME,
    CredentialDecryptError,
    EncryptedTextField,
    decrypt_credential,
    encrypt_credential,
    local_key,
)

TOKEN = "eyJhbGciOiJSUzI1NiJ9.wlcg-bearer-token.signature"


@pytest.fixture
def key_dir(settings: Settings, tmp_path: Path) -> Path:
    """Local mode: no configured key, VAR_DIR in a fresh folder."""
    settings.FEDPROBE_CREDENTIAL_KEYS = []
    settings.VAR_DIR = tmp_path
    return tmp_path


def test_credential_round_trips_and_is_not_stored_in_clear(key_dir: Path) -> None:
    token = encrypt_credential(TOKEN)
    assert TOKEN not in token
    assert decrypt_credential(token) == TOKEN


def test_same_credential_encrypts_differently_each_time(key_dir: Path) -> None:
    assert encrypt_credential(TOKEN) != encrypt_credential(TOKEN)


def test_configured_key_is_used(settings: Settings) -> None:
    key = Fernet.generate_key().decode()
    settings.FEDPROBE_CREDENTIAL_KEYS = [key]
    assert Fernet(key).decrypt(encrypt_credential(TOKEN).encode()).decode() == TOKEN


def test_credential_from_another_key_fails_with_a_clear_error(settings: Settings) -> None:
    settings.FEDPROBE_CREDENTIAL_KEYS = [Fernet.generate_key().decode()]
    token = encrypt_credential(TOKEN)
    settings.FEDPROBE_CREDENTIAL_KEYS = [Fernet.generate_key().decode()]
    with pytest.raises(CredentialDecryptError, match="FEDPROBE_CREDENTIAL_KEY") as failure:
        decrypt_credential(token)
    assert TOKEN not in str(failure.value)


def test_rotated_key_still_decrypts_old_credentials(settings: Settings) -> None:
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.FEDPROBE_CREDENTIAL_KEYS = [old]
    token = encrypt_credential(TOKEN)
    settings.FEDPROBE_CREDENTIAL_KEYS = [new, old]
    assert decrypt_credential(token) == TOKEN
    assert Fernet(new).decrypt(encrypt_credential(TOKEN).encode()).decode() == TOKEN


def test_local_key_is_generated_once_with_mode_0600(key_dir: Path) -> None:
    token = encrypt_credential(TOKEN)
    key_file = key_dir / KEY_FILE_NAME
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert decrypt_credential(token) == TOKEN
    assert local_key(key_file) == key_file.read_text().strip()
    assert [p.name for p in key_dir.iterdir()] == [KEY_FILE_NAME]


def test_local_key_does_not_depend_on_secret_key(key_dir: Path, settings: Settings) -> None:
    token = encrypt_credential(TOKEN)
    assert settings.SECRET_KEY not in (key_dir / KEY_FILE_NAME).read_text()
    settings.SECRET_KEY = "another-secret-key-" * 4
    assert decrypt_credential(token) == TOKEN


def test_processes_racing_to_create_the_local_key_get_the_same_key(tmp_path: Path) -> None:
    key_file = tmp_path / "var" / KEY_FILE_NAME
    start = threading.Barrier(16)

    def race(_: int) -> str:
        start.wait()
        return local_key(key_file)

    with ThreadPoolExecutor(16) as pool:
        keys = set(pool.map(race, range(16)))
    assert keys == {key_file.read_text().strip()}
    assert [p.name for p in key_file.parent.iterdir()] == [KEY_FILE_NAME]


def test_local_key_readable_by_others_is_refused(tmp_path: Path) -> None:
    key_file = tmp_path / KEY_FILE_NAME
    key_file.write_text(Fernet.generate_key().decode())
    key_file.chmod(0o644)
    with pytest.raises(ImproperlyConfigured, match="chmod 600"):
        local_key(key_file)


# -- EncryptedTextField ----------------------------------------------------------------------


@pytest.fixture
def vault(db: None, key_dir: Path) -> Iterator[Any]:
    """A model with an encrypted column, its table made inside the test's transaction."""
    with isolate_apps("webapp.accounts"):

        class Vault(models.Model):
            """A row holding one secret (test table)."""

            secret = EncryptedTextField(blank=True, null=True)

            class Meta:
                app_label = "accounts"

        with connection.schema_editor() as editor:
            editor.create_model(Vault)
        yield Vault


def stored(vault: Any, pk: int) -> str | None:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT secret FROM {vault._meta.db_table} WHERE id = %s", [pk])
        return cursor.fetchone()[0]


def test_field_stores_ciphertext_and_loads_plaintext(vault: Any) -> None:
    row = vault.objects.create(secret=TOKEN)
    assert TOKEN not in stored(vault, row.pk)
    assert vault.objects.get(pk=row.pk).secret == TOKEN


def test_field_update_through_queryset_encrypts(vault: Any) -> None:
    row = vault.objects.create(secret="old")
    vault.objects.filter(pk=row.pk).update(secret=TOKEN)
    assert TOKEN not in stored(vault, row.pk)
    assert vault.objects.get(pk=row.pk).secret == TOKEN


def test_field_keeps_empty_and_null_as_they_are(vault: Any) -> None:
    empty, null = vault.objects.create(secret=""), vault.objects.create(secret=None)
    assert (stored(vault, empty.pk), stored(vault, null.pk)) == ("", None)
    assert vault.objects.filter(secret="").get().pk == empty.pk
    assert vault.objects.filter(secret__isnull=True).get().pk == null.pk


def test_field_refuses_lookups_that_cannot_match_ciphertext(vault: Any) -> None:
    vault.objects.create(secret=TOKEN)
    with pytest.raises(FieldError):
        vault.objects.filter(secret=TOKEN).exists()
    with pytest.raises(FieldError):
        vault.objects.filter(secret__contains="bearer").exists()


def test_field_dump_carries_ciphertext(vault: Any) -> None:
    row = vault.objects.create(secret=TOKEN)
    dumped = vault._meta.get_field("secret").value_to_string(row)
    assert TOKEN not in dumped
    assert decrypt_credential(dumped) == TOKEN


def test_model_form_never_renders_the_stored_credential(vault: Any) -> None:
    row = vault.objects.create(secret=TOKEN)
    form = forms.modelform_factory(vault, fields=["secret"])(instance=row)
    html = str(form["secret"])
    assert 'type="password"' in html
    assert TOKEN not in html


def test_model_serializer_accepts_the_credential_but_never_outputs_it(vault: Any) -> None:
    class VaultSerializer(serializers.ModelSerializer):
        class Meta:
            model = vault
            fields = "__all__"

    writer = VaultSerializer(data={"secret": TOKEN})
    assert writer.is_valid(), writer.errors
    row = writer.save()
    assert vault.objects.get(pk=row.pk).secret == TOKEN
    assert "secret" not in VaultSerializer(row).data
