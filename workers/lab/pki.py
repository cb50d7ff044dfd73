"""The lab's PKI, made with `cryptography` alone: a CA, a host certificate for localhost, a
user certificate and RFC 3820 proxies of it; and a rogue CA that issues the same kinds of
certificates (its user has the lab user's DN) for tests of what must be refused.

Secrets (CA keys, user keys, proxies) live in a 0700 folder; the CA dirs, host certificates
and host keys in a world-readable one, as xrootd (user nobody) reads them. Host keys belong
to the servers' user with mode 0400: XrdSecgsi refuses a key with any other mode. The PKI is
made once per lab dir and kept across `up`s, so credentials handed out stay valid; it is
made again when a file is missing or a certificate ends within `RENEW_BEFORE`.
"""

from __future__ import annotations

import os
import secrets
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from ipaddress import ip_address
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID, ObjectIdentifier

LAB_ORG = "fedprobe lab"
ROGUE_ORG = "rogue lab"
HOST_NAME = "localhost"
USER_CN = "lab user"
USER_DN = f"/O={LAB_ORG}/CN={USER_CN}"
PROXY_LIFETIME = timedelta(days=7)
RENEW_BEFORE = timedelta(days=30)
_CA_LIFETIME = timedelta(days=3650)
_LEAF_LIFETIME = timedelta(days=365)
_BACKDATE = timedelta(days=1)
_KEY_BITS = 2048
# proxyCertInfo (RFC 3820) with the policy id-ppl-inheritAll, as grid-proxy-init writes it.
_PROXY_CERT_INFO = x509.UnrecognizedExtension(
    ObjectIdentifier("1.3.6.1.5.5.7.1.14"), bytes.fromhex("300c300a06082b06010505071501")
)

Key = rsa.RSAPrivateKey


@dataclass(frozen=True)
class Authority:
    """One CA and what it issued: a host certificate for localhost and a user certificate.

    `name` prefixes its files ("lab", "rogue"); its CA dir is what X509_CERT_DIR names.
    """

    name: str
    org: str
    secret_dir: Path
    public_dir: Path

    @property
    def ca_dir(self) -> Path:
        return self.public_dir / ("ca" if self.name == "lab" else f"{self.name}-ca")

    @property
    def ca_cert(self) -> Path:
        return self.ca_dir / f"{self.name}-ca.pem"

    @property
    def ca_key(self) -> Path:
        return self.secret_dir / f"{self.name}-ca-key.pem"

    @property
    def host_cert(self) -> Path:
        return self.public_dir / f"{self.name}-hostcert.pem"

    @property
    def host_key(self) -> Path:
        return self.public_dir / f"{self.name}-hostkey.pem"

    @property
    def user_cert(self) -> Path:
        return self.secret_dir / f"{self.name}-usercert.pem"

    @property
    def user_key(self) -> Path:
        return self.secret_dir / f"{self.name}-userkey.pem"

    @property
    def ca_dn(self) -> str:
        return f"/O={self.org}/CN={self.org} CA"

    def files(self) -> list[Path]:
        return [self.ca_cert, self.ca_key, self.host_cert, self.host_key, self.user_cert]

    def is_usable(self, until: datetime) -> bool:
        """Every file there, and every certificate valid until `until`, issued by this CA."""
        if not all(path.exists() for path in (*self.files(), self.user_key)):
            return False
        try:
            ca = _load_cert(self.ca_cert)
            leaves = [_load_cert(self.host_cert), _load_cert(self.user_cert)]
        except ValueError:
            return False
        return all(
            cert.not_valid_after_utc >= until and cert.issuer == ca.subject
            for cert in (ca, *leaves)
        )

    def create(self, key_owner: tuple[int, int] | None) -> None:
        now = datetime.now(UTC)
        ca_key = _new_key()
        ca_name = _name(self.org, f"{self.org} CA")
        ca = _ca_certificate(ca_name, ca_key, now)
        host_key, user_key = _new_key(), _new_key()
        host = _leaf_certificate(
            _name(self.org, HOST_NAME),
            host_key,
            ca=ca,
            ca_key=ca_key,
            now=now,
            extensions=_host_extensions(),
        )
        user = _leaf_certificate(
            _name(LAB_ORG, USER_CN), user_key, ca=ca, ca_key=ca_key, now=now,
            extensions=_user_extensions(),
        )  # fmt: skip
        _write_secret(self.ca_key, _key_pem(ca_key))
        _write_secret(self.user_key, _key_pem(user_key))
        _write_public(self.user_cert, _cert_pem(user))
        _write_public(self.host_cert, _cert_pem(host))
        _write_secret(self.host_key, _key_pem(host_key), mode=0o400, owner=key_owner)
        self._write_ca_dir(ca)

    def _write_ca_dir(self, ca: x509.Certificate) -> None:
        if self.ca_dir.exists():
            for old in self.ca_dir.iterdir():
                old.unlink()
        self.ca_dir.mkdir(mode=0o755, parents=True, exist_ok=True)
        _write_public(self.ca_cert, _cert_pem(ca))
        digest = subject_hash(self.ca_cert)
        (self.ca_dir / f"{digest}.0").symlink_to(self.ca_cert.name)
        _write_public(self.ca_dir / f"{digest}.signing_policy", self._signing_policy())

    def _signing_policy(self) -> bytes:
        """What globus tools need beside the CA (XrdSecgsi never reads it)."""
        subjects = " ".join(f'"/O={org}/*"' for org in dict.fromkeys((LAB_ORG, self.org)))
        return (
            f"# the {self.org} CA, written by the fedprobe lab\n"
            f"access_id_CA  X509    '{self.ca_dn}'\n"
            "pos_rights    globus  CA:sign\n"
            f"cond_subjects globus  '{subjects}'\n"
        ).encode()

    def write_proxy(
        self, path: Path, *, expired: bool = False, lifetime: timedelta = PROXY_LIFETIME
    ) -> Path:
        """An RFC 3820 proxy of the user: proxy cert, its key and the user cert, mode 0600.

        An expired proxy was valid from two hours ago until one hour ago.
        """
        user = _load_cert(self.user_cert)
        user_key = serialization.load_pem_private_key(self.user_key.read_bytes(), None)
        assert isinstance(user_key, rsa.RSAPrivateKey)
        now = datetime.now(UTC)
        if expired:
            start, end = now - timedelta(hours=2), now - timedelta(hours=1)
        else:
            start, end = now - timedelta(minutes=5), min(now + lifetime, user.not_valid_after_utc)
        proxy_key = _new_key()
        serial = secrets.randbits(31) | 1
        subject = x509.Name([*user.subject.rdns, _rdn(NameOID.COMMON_NAME, str(serial))])
        proxy = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(user.subject)
            .public_key(proxy_key.public_key())
            .serial_number(serial)
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(_key_usage(digital_signature=True, key_encipherment=True), True)
            .add_extension(_PROXY_CERT_INFO, critical=True)
            .sign(user_key, hashes.SHA256())
        )
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        _write_secret(path, _cert_pem(proxy) + _key_pem(proxy_key) + _cert_pem(user))
        return path


@dataclass(frozen=True)
class LabPki:
    """The lab's CA and the rogue one, in `secret_dir` (0700) and `public_dir`."""

    secret_dir: Path
    public_dir: Path

    @property
    def lab(self) -> Authority:
        return Authority("lab", LAB_ORG, self.secret_dir, self.public_dir)

    @property
    def rogue(self) -> Authority:
        return Authority("rogue", ROGUE_ORG, self.secret_dir, self.public_dir)

    def ensure(self, key_owner: tuple[int, int] | None) -> bool:
        """Make what is missing or ends soon; returns whether anything was made."""
        self.secret_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.secret_dir.chmod(0o700)
        self.public_dir.mkdir(mode=0o755, parents=True, exist_ok=True)
        self.public_dir.chmod(0o755)
        until = datetime.now(UTC) + RENEW_BEFORE
        made = False
        for authority in (self.lab, self.rogue):
            if not authority.is_usable(until):
                authority.create(key_owner)
                made = True
            elif key_owner is not None:
                os.chown(authority.host_key, *key_owner)
        return made


def subject_hash(cert: Path) -> str:
    """The name of the certificate's link in a CA dir, as `openssl x509 -subject_hash`."""
    done = subprocess.run(
        ["openssl", "x509", "-subject_hash", "-noout", "-in", str(cert)],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def dn_of(cert: Path) -> str:
    """The certificate's subject as grid tools write it: /O=fedprobe lab/CN=lab user."""
    subject = _load_cert(cert).subject
    return "".join(f"/{rdn.rfc4514_string()}" for rdn in subject.rdns)


# -- certificates ------------------------------------------------------------------------------


def _ca_certificate(name: x509.Name, key: Key, now: datetime) -> x509.Certificate:
    public = key.public_key()
    return (
        _builder(name, name, public, now, _CA_LIFETIME)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(_key_usage(key_cert_sign=True, crl_sign=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .sign(key, hashes.SHA256())
    )


def _leaf_certificate(
    name: x509.Name,
    key: Key,
    *,
    ca: x509.Certificate,
    ca_key: Key,
    now: datetime,
    extensions: Sequence[tuple[x509.ExtensionType, bool]],
) -> x509.Certificate:
    public = key.public_key()
    builder = (
        _builder(name, ca.subject, public, now, _LEAF_LIFETIME)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
    )
    for extension, critical in extensions:
        builder = builder.add_extension(extension, critical)
    return builder.sign(ca_key, hashes.SHA256())


def _host_extensions() -> list[tuple[x509.ExtensionType, bool]]:
    names = [
        x509.DNSName(HOST_NAME),
        x509.IPAddress(ip_address("127.0.0.1")),
        x509.IPAddress(ip_address("::1")),
    ]
    usages = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
    return [
        (_key_usage(digital_signature=True, key_encipherment=True), True),
        (x509.ExtendedKeyUsage(usages), False),
        (x509.SubjectAlternativeName(names), False),
    ]


def _user_extensions() -> list[tuple[x509.ExtensionType, bool]]:
    return [
        (_key_usage(digital_signature=True, key_encipherment=True), True),
        (x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), False),
    ]


def _builder(
    subject: x509.Name,
    issuer: x509.Name,
    public: rsa.RSAPublicKey,
    now: datetime,
    lifetime: timedelta,
) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + lifetime)
    )


def _key_usage(
    *,
    digital_signature: bool = False,
    key_encipherment: bool = False,
    key_cert_sign: bool = False,
    crl_sign: bool = False,
) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=digital_signature,
        content_commitment=False,
        key_encipherment=key_encipherment,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=key_cert_sign,
        crl_sign=crl_sign,
        encipher_only=False,
        decipher_only=False,
    )


def _name(org: str, common_name: str) -> x509.Name:
    return x509.Name([_rdn(NameOID.ORGANIZATION_NAME, org), _rdn(NameOID.COMMON_NAME, common_name)])


def _rdn(oid: ObjectIdentifier, value: str) -> x509.RelativeDistinguishedName:
    return x509.RelativeDistinguishedName([x509.NameAttribute(oid, value)])


def _new_key() -> Key:
    return rsa.generate_private_key(public_exponent=65537, key_size=_KEY_BITS)


def _load_cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: Key) -> bytes:
    # The traditional (PKCS#1) form is what grid tools write and every reader accepts.
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )


# -- files -------------------------------------------------------------------------------------


def _write_public(path: Path, data: bytes) -> None:
    _write_secret(path, data, mode=0o644)


def _write_secret(
    path: Path, data: bytes, *, mode: int = 0o600, owner: tuple[int, int] | None = None
) -> None:
    """Write `data` to a new file that never had a wider mode, then move it over `path`."""
    partial = path.with_name(path.name + ".partial")
    partial.unlink(missing_ok=True)
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    if owner is not None:
        os.chown(partial, *owner)
    partial.chmod(mode)
    partial.replace(path)
