"""Endpoint credentials (bearer tokens, X.509 proxies) encrypted at rest with Fernet.

The key is not SECRET_KEY. It comes from FEDPROBE_CREDENTIAL_KEY (settings
FEDPROBE_CREDENTIAL_KEYS: the first key encrypts, every key decrypts, so a key can be
rotated). Without it, in local mode, a key is generated once and kept in
VAR_DIR/credential.key with mode 0600; losing that file makes stored credentials unreadable.
"""

from __future__ import annotations

import contextlib
import functools
import os
import stat
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django import forms
from django.conf import settings
from django.core.exceptions import FieldError, ImproperlyConfigured
from django.db import models
from django.db.models.lookups import Exact

KEY_FILE_NAME = "credential.key"


class CredentialDecryptError(ImproperlyConfigured):
    """A stored credential does not decrypt with the configured keys."""


def encrypt_credential(text: str) -> str:
    return _fernet().encrypt(text.encode()).decode("ascii")


def decrypt_credential(token: str) -> str:
    try:
        return _fernet().decrypt(token.encode("ascii")).decode()
    except (InvalidToken, UnicodeEncodeError):
        raise CredentialDecryptError(
            "a stored credential does not decrypt with FEDPROBE_CREDENTIAL_KEY "
            "(wrong or rotated-out key, or not a credential)"
        ) from None


def credential_keys() -> tuple[str, ...]:
    """The configured keys, or the local key file's key when none is configured."""
    configured = tuple(settings.FEDPROBE_CREDENTIAL_KEYS)
    if configured:
        return configured
    return (local_key(Path(settings.VAR_DIR) / KEY_FILE_NAME),)


def local_key(path: Path) -> str:
    """The key in `path`, created (mode 0600) if missing; safe when processes race."""
    if not path.exists():
        _create_key_file(path)
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise ImproperlyConfigured(
            f"{path} is readable by others (mode {mode:o}): run chmod 600 {path}"
        )
    return path.read_text().strip()


def _create_key_file(path: Path) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # VAR_DIR: private
    fd, partial = tempfile.mkstemp(dir=path.parent, prefix=".credential-key-")  # mode 0600
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(Fernet.generate_key() + b"\n")
            out.flush()
            os.fsync(out.fileno())
        with contextlib.suppress(FileExistsError):
            os.link(partial, path)  # atomic: the first process to get here wins
    finally:
        os.unlink(partial)


def _fernet() -> MultiFernet:
    return _fernet_for(credential_keys())


@functools.cache
def _fernet_for(keys: tuple[str, ...]) -> MultiFernet:
    return MultiFernet([Fernet(key) for key in keys])


class _EmptyOnlyExact(Exact):
    """`credential=""` works; comparing with a text cannot (equal texts encrypt differently)."""

    def get_prep_lookup(self) -> Any:
        if self.rhs not in ("", None):
            raise FieldError("an encrypted field can only be compared with '' or None")
        return super().get_prep_lookup()


if TYPE_CHECKING:
    # What a model's field is set to and gives back: text, as for TextField.
    _TextField = models.TextField[str, str]
else:
    _TextField = models.TextField


class EncryptedTextField(_TextField):
    """A text column that stores a Fernet token and gives the plaintext in Python.

    Lookups other than `isnull` and comparison with "" are refused. Forms render it as an
    empty password input (the stored value never goes back to the browser); model
    serializers make it write-only (see AccountsConfig.ready). The empty string is stored
    as is: there is no secret in it.
    """

    _lookups_allowed = frozenset({"isnull", "exact"})

    def from_db_value(self, value: str | None, expression: object, connection: object) -> Any:
        if not value:
            return value
        return decrypt_credential(value)

    def get_prep_value(self, value: Any) -> Any:
        text = super().get_prep_value(value)
        if not text:
            return text
        return encrypt_credential(text)

    def value_to_string(self, obj: models.Model) -> str:
        """Serialized dumps carry the ciphertext, not the credential."""
        return str(self.get_prep_value(self.value_from_object(obj)) or "")

    def get_lookup(self, lookup_name: str) -> Any:
        if lookup_name not in self._lookups_allowed:
            return None
        return super().get_lookup(lookup_name)

    def formfield(self, **kwargs: Any) -> Any:
        kwargs.setdefault("widget", forms.PasswordInput(render_value=False))
        return super().formfield(**kwargs)


EncryptedTextField.register_lookup(_EmptyOnlyExact)
