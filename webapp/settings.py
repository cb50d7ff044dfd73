"""Settings for fedprobe, read from the environment.

With nothing set, fedprobe runs with safe local defaults: SQLite in ./var/,
DEBUG off, loopback-only hosts. Malformed values fail loudly at start-up.
"""

import importlib.util
import os
import re
import stat
from pathlib import Path

from celery.schedules import crontab
from django.core.exceptions import ImproperlyConfigured

from workers.agent.config import amqp_tls_options
from workers.engine.egress import parse_networks
from workers.engine.params import Method, Operation, Pattern

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("FEDPROBE_VAR_DIR", BASE_DIR / "var"))


# VAR_DIR holds the SQLite database (sessions, password hashes), the credential key, the
# embedded broker's messages and bin/run's logs: this user's only, whatever the umask.
def private_dir(path: Path) -> Path:
    """A folder only its owner may enter (0700): made so, or tightened if it is ours."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    _tighten(path, 0o700)
    return path


def private_file(path: Path) -> Path:
    """A file only its owner may read (0600), made empty if missing (an empty file is a new
    SQLite database, and the journal SQLite writes next to it takes its mode)."""
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    _tighten(path, 0o600)
    return path


def _tighten(path: Path, mode: int) -> None:
    status = path.stat()
    if stat.S_IMODE(status.st_mode) & ~mode and status.st_uid == os.getuid():
        path.chmod(mode)


def env_str(name: str, default: str) -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean (use true/false)")


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a whole number") from None


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = os.environ.get(name, default)
    if value not in choices:
        raise ImproperlyConfigured(f"{name}={value!r} is not one of {', '.join(choices)}")
    return value


def env_rate(name: str, default: str) -> str:
    """A throttle rate like 10/min (per s, sec, m, min, h, hour, d or day)."""
    value = os.environ.get(name, default).strip()
    if not re.fullmatch(r"[1-9][0-9]*/(s|sec|m|min|h|hour|d|day)", value):
        raise ImproperlyConfigured(f"{name}={value!r} is not a rate like 10/min")
    return value


def env_secret(name: str, *, required: bool, min_length: int) -> str:
    """A secret from the environment; its value never appears in an error message."""
    value = os.environ.get(name, "")
    if not value:
        if required:
            raise ImproperlyConfigured(f"{name} must be set when FEDPROBE_PRODUCTION=true")
        return ""
    if len(value) < min_length or len(set(value)) < 5:
        raise ImproperlyConfigured(
            f"{name} is too weak: use at least {min_length} random characters"
        )
    return value


def env_networks(name: str, default: list[str]) -> list[str]:
    """Comma-separated networks (CIDRs, or single addresses), written back normalized."""
    try:
        return [str(network) for network in parse_networks(env_list(name, default))]
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}: {exc}") from None


def env_fernet_keys(name: str, *, required: bool) -> list[str]:
    """Comma-separated Fernet keys; their values never appear in an error message."""
    from cryptography.fernet import Fernet

    keys = env_list(name, [])
    if not keys and required:
        raise ImproperlyConfigured(f"{name} must be set when FEDPROBE_PRODUCTION=true")
    for position, key in enumerate(keys, start=1):
        try:
            Fernet(key)
        except ValueError:
            raise ImproperlyConfigured(
                f"{name}: key {position} is not a Fernet key (32 url-safe base64-encoded "
                f"bytes; make one with `python -c 'from cryptography.fernet import Fernet; "
                f"print(Fernet.generate_key().decode())'`)"
            ) from None
    return keys


# FEDPROBE_PRODUCTION=true: a real deployment behind a TLS-terminating proxy (see
# docs/deployment.md). It requires the secrets and hosts below and turns on HTTPS-only cookies,
# HSTS and the redirect to HTTPS.
PRODUCTION = env_bool("FEDPROBE_PRODUCTION", False)
DEBUG = env_bool("FEDPROBE_DEBUG", False)
if PRODUCTION and DEBUG:
    raise ImproperlyConfigured("FEDPROBE_DEBUG=true is not allowed with FEDPROBE_PRODUCTION=true")
SECRET_KEY = (
    env_secret("FEDPROBE_SECRET_KEY", required=PRODUCTION, min_length=50)
    or "insecure-local-only-key-set-FEDPROBE_SECRET_KEY-in-production"
)
if PRODUCTION and not env_list("FEDPROBE_ALLOWED_HOSTS", []):
    raise ImproperlyConfigured("FEDPROBE_ALLOWED_HOSTS must be set when FEDPROBE_PRODUCTION=true")
ALLOWED_HOSTS = env_list("FEDPROBE_ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("FEDPROBE_CSRF_TRUSTED_ORIGINS", [])

# Endpoint credentials are encrypted with these (webapp.accounts.crypto), never SECRET_KEY:
# the first key encrypts, all decrypt. Empty in local mode: a key file in VAR_DIR is used.
FEDPROBE_CREDENTIAL_KEYS = env_fernet_keys("FEDPROBE_CREDENTIAL_KEY", required=PRODUCTION)

if PRODUCTION:
    # The proxy in front (nginx in docker-compose.yml) terminates TLS and sets this header;
    # it must overwrite any X-Forwarded-Proto a client sends.
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = True
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = env_int("FEDPROBE_HSTS_SECONDS", 365 * 24 * 3600)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("FEDPROBE_HSTS_INCLUDE_SUBDOMAINS", True)
    SECURE_HSTS_PRELOAD = env_bool("FEDPROBE_HSTS_PRELOAD", True)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "webapp.core",
    "webapp.accounts",
    "webapp.sites",
    "webapp.campaigns",
    "webapp.advice",
    "webapp.watch",
    "webapp.notifications",
    "webapp.archivers",
    "webapp.dashboards",
    "webapp.demo",
]
# Swagger UI and ReDoc files for /api/docs/ come from drf-spectacular-sidecar, served from
# our static files: no CDN (grid sites are often air-gapped).
if importlib.util.find_spec("drf_spectacular_sidecar"):
    INSTALLED_APPS.append("drf_spectacular_sidecar")

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "webapp.core.csp.ContentSecurityPolicyMiddleware",
    # A GET on an action's address (a bookmark of /campaigns/1/cancel/): a page, not Django's
    # empty 405 (webapp/core/errors.py).
    "webapp.core.errors.MethodNotAllowedPageMiddleware",
]
# A form sent with a stale token (logged in again in another tab): a page of the site that
# says so and shows back what was typed, secrets left out (webapp/core/errors.py).
CSRF_FAILURE_VIEW = "webapp.core.errors.csrf_failure"

ROOT_URLCONF = "webapp.urls"
WSGI_APPLICATION = "webapp.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "webapp.core.context_processors.role",
            ],
        },
    },
]


# DATABASE_URL query parameters passed to libpq as they are: TLS to a PostgreSQL on another
# host (?sslmode=verify-full&sslrootcert=/etc/fedprobe/db-ca.pem), and how long to try.
_DATABASE_URL_OPTIONS = frozenset(
    {"sslmode", "sslrootcert", "sslcert", "sslkey", "sslcrl", "connect_timeout", "application_name"}
)
_SSLMODES = frozenset({"disable", "allow", "prefer", "require", "verify-ca", "verify-full"})


def _database_from_url(url: str) -> dict[str, object]:
    from urllib.parse import parse_qsl, unquote, urlparse

    parsed = urlparse(url)
    if parsed.scheme not in {"postgres", "postgresql"}:
        raise ImproperlyConfigured(f"DATABASE_URL scheme {parsed.scheme!r} is not supported")
    options: dict[str, object] = {"options": "-c jit=off"}
    for name, value in parse_qsl(parsed.query, keep_blank_values=True):
        if name not in _DATABASE_URL_OPTIONS:
            known = ", ".join(sorted(_DATABASE_URL_OPTIONS))
            raise ImproperlyConfigured(f"DATABASE_URL option {name!r} is not one of {known}")
        if name == "sslmode" and value not in _SSLMODES:
            raise ImproperlyConfigured(
                f"DATABASE_URL sslmode {value!r} is not one of {', '.join(sorted(_SSLMODES))}"
            )
        options[name] = value
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": parsed.path.lstrip("/"),
        "USER": unquote(parsed.username or ""),
        "PASSWORD": unquote(parsed.password or ""),
        "HOST": parsed.hostname or "",
        "PORT": str(parsed.port or ""),
        # No JIT: the dashboards' queries are many small index probes (a matrix cell is a
        # handful), whose estimated cost passes jit_above_cost at a few thousand cells (or
        # sooner on never-analyzed small tables), and compiling them took 1-3 s for a query
        # that runs in 30 ms.
        "OPTIONS": options,
    }


_database_url = os.environ.get("DATABASE_URL")
DATABASES = {
    "default": _database_from_url(_database_url)
    if _database_url
    else {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": private_file(private_dir(VAR_DIR) / "fedprobe.sqlite3"),
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# run_compare_idx carries the series metrics as non-key columns on PostgreSQL; SQLite (the
# embedded default) builds it from its key columns alone, which is all it can do.
SILENCED_SYSTEM_CHECKS = ["models.W040"]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env_str("FEDPROBE_STATIC_ROOT", str(BASE_DIR / "static-collected")))

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "login"
# Passwords set by an admin (the users page, `manage.py createuser`) or by createsuperuser.
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": f"django.contrib.auth.password_validation.{name}"}
    for name in (
        "UserAttributeSimilarityValidator",
        "MinimumLengthValidator",
        "CommonPasswordValidator",
        "NumericPasswordValidator",
    )
]
AUTHENTICATION_BACKENDS = [
    "django.contrib.auth.backends.ModelBackend",
    # Acts only on the sign-in callback, and only when FEDPROBE_OIDC_ISSUER is set.
    "webapp.accounts.oidc.SsoBackend",
]


def env_oidc_issuer(name: str) -> str:
    """The provider's issuer URL: https, or http on a loopback address (tests)."""
    from urllib.parse import urlparse

    value = env_str(name, "").strip().rstrip("/")
    if not value:
        return ""
    parsed = urlparse(value)
    loopback = parsed.hostname in {"127.0.0.1", "localhost", "::1"}
    if parsed.scheme != "https" and not (parsed.scheme == "http" and loopback):
        raise ImproperlyConfigured(f"{name}={value!r} is not an https:// URL")
    return value


def env_secret_file(name: str) -> str:
    """A secret read from the file the variable names; neither appears in an error."""
    path = env_str(name, "")
    if not path:
        raise ImproperlyConfigured(f"{name} must be set when FEDPROBE_OIDC_ISSUER is")
    try:
        secret = Path(path).read_text().strip()
    except OSError as exc:
        raise ImproperlyConfigured(f"{name}: cannot read it ({exc.strerror})") from None
    if not secret:
        raise ImproperlyConfigured(f"{name}: the file is empty")
    return secret


def env_role_map(name: str) -> dict[str, str]:
    """GROUP=ROLE pairs, comma-separated: which group of the provider gives which role."""
    mapping = {}
    for item in env_list(name, []):
        group, _, role = item.rpartition("=")
        if not group or role not in ("viewer", "operator", "admin"):
            raise ImproperlyConfigured(
                f"{name}: {item!r} is not GROUP=ROLE with a role viewer, operator or admin"
            )
        mapping[group.strip()] = role
    return mapping


# Single sign-on through an OpenID Connect provider (INDIGO IAM, CERN SSO; docs/deployment.md),
# off unless FEDPROBE_OIDC_ISSUER is set. The provider's endpoints come from its discovery
# document (webapp.accounts.oidc); mozilla-django-oidc does the code flow with state, nonce
# and PKCE, and these OIDC_* settings are its own.
FEDPROBE_OIDC_ISSUER = env_oidc_issuer("FEDPROBE_OIDC_ISSUER")
FEDPROBE_OIDC_NAME = env_str("FEDPROBE_OIDC_NAME", "single sign-on")
FEDPROBE_OIDC_USERNAME_CLAIM = env_str("FEDPROBE_OIDC_USERNAME_CLAIM", "preferred_username")
FEDPROBE_OIDC_ROLE_CLAIM = env_str("FEDPROBE_OIDC_ROLE_CLAIM", "groups")
FEDPROBE_OIDC_ROLE_MAP = env_role_map("FEDPROBE_OIDC_ROLE_MAP")
# The role of a new user in none of the mapped groups; "none" refuses them.
FEDPROBE_OIDC_DEFAULT_ROLE = env_choice(
    "FEDPROBE_OIDC_DEFAULT_ROLE", "viewer", ("viewer", "operator", "admin", "none")
)
OIDC_RP_CLIENT_ID = env_str("FEDPROBE_OIDC_CLIENT_ID", "")
if FEDPROBE_OIDC_ISSUER and not OIDC_RP_CLIENT_ID:
    raise ImproperlyConfigured("FEDPROBE_OIDC_CLIENT_ID must be set when FEDPROBE_OIDC_ISSUER is")
OIDC_RP_CLIENT_SECRET = (
    env_secret_file("FEDPROBE_OIDC_CLIENT_SECRET_FILE") if FEDPROBE_OIDC_ISSUER else ""
)
OIDC_RP_SIGN_ALGO = env_choice(
    "FEDPROBE_OIDC_SIGN_ALGO", "RS256", ("RS256", "RS384", "RS512", "ES256", "ES384", "ES512")
)
OIDC_RP_SCOPES = env_str("FEDPROBE_OIDC_SCOPES", "openid profile email")
OIDC_USE_PKCE = True
OIDC_TOKEN_USE_BASIC_AUTH = True  # client_secret_basic: what every provider accepts
OIDC_TIMEOUT = 10
OIDC_AUTHENTICATION_CALLBACK_URL = "oidc-callback"
OIDC_REDIRECT_REQUIRE_HTTPS = PRODUCTION

# Throttle counts live in the cache: FEDPROBE_CACHE_URL=redis://... shares them between the
# web processes; without it each process counts on its own.
_cache_url = env_str("FEDPROBE_CACHE_URL", "")
if _cache_url and not _cache_url.startswith(("redis://", "rediss://", "unix://")):
    raise ImproperlyConfigured("FEDPROBE_CACHE_URL must be a redis://, rediss:// or unix:// URL")
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": _cache_url}
    if _cache_url
    else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
}

# Request bodies Django reads whole: a trace upload's JSON (webapp/campaigns/traces.py: up to
# 4 MiB of recorder CSV, every quote of it escaped). nginx (deploy/nginx.conf) keeps 1 MiB
# for every other path.
DATA_UPLOAD_MAX_MEMORY_SIZE = 8 * 1024 * 1024

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # `Authorization: Token KEY`, stored as a digest (webapp.accounts.models.ApiToken)
        "webapp.accounts.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    # Any role reads, operators and admins write; views narrow this (CanEditObject), never widen.
    "DEFAULT_PERMISSION_CLASSES": [
        "rest_framework.permissions.IsAuthenticated",
        "webapp.accounts.roles.IsOperatorOrReadOnly",
    ],
    "DEFAULT_PAGINATION_CLASS": "webapp.core.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_THROTTLE_CLASSES": ["webapp.accounts.throttles.WriteRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {
        "login": env_rate("FEDPROBE_THROTTLE_LOGIN", "10/min"),
        "writes": env_rate("FEDPROBE_THROTTLE_WRITES", "120/min"),
    },
    # Proxies in front that append to X-Forwarded-For (1 behind docker-compose's nginx): the
    # client address throttles count by. 0 ignores the header, which a client could forge.
    "NUM_PROXIES": env_int("FEDPROBE_NUM_PROXIES", 0),
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "fedprobe API",
    "DESCRIPTION": "Sites, endpoints, campaigns and runs of fedprobe, the storage prober.",
    "VERSION": "1.0.0",
    "SCHEMA_PATH_PREFIX": "/api/v1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["webapp.accounts.roles.IsViewer"],
    # Write-only fields (credentials) appear in request components only.
    "COMPONENT_SPLIT_REQUEST": True,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # The engine's methods and patterns appear in campaigns and runs: one enum each.
    "ENUM_NAME_OVERRIDES": {
        "MethodEnum": [m.value for m in Method],
        "PatternEnum": [p.value for p in Pattern],
        "OperationEnum": [o.value for o in Operation],
        "CredentialKindEnum": "webapp.sites.credentials.KIND_CHOICES",
        # Two "severity" fields: a downtime's (GOCDB's) and a regression's.
        "DowntimeSeverityEnum": "webapp.sites.models.Downtime.Severity",
        "RegressionSeverityEnum": "webapp.watch.models.Regression.Severity",
        # Two "source" fields: where a site or endpoint came from, and a matrix threshold's.
        "RegistrySourceEnum": "webapp.sites.models.Source",
    },
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"redact_secrets": {"()": "webapp.core.redact.RedactSecretsFilter"}},
    "formatters": {
        "plain": {"format": "{asctime} {levelname} {name}: {message}", "style": "{"},
        "django.server": {
            "()": "django.utils.log.ServerFormatter",
            "format": "[{server_time}] {message}",
            "style": "{",
        },
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "plain",
            "filters": ["redact_secrets"],
        },
        # runserver's access log: Django's own handler for it has no filter, and query
        # strings (?token=...) would be written as they came.
        "django.server": {
            "class": "logging.StreamHandler",
            "formatter": "django.server",
            "filters": ["redact_secrets"],
        },
    },
    "root": {
        "handlers": ["console"],
        "level": env_choice(
            "FEDPROBE_LOG_LEVEL", "INFO", ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
        ),
    },
    # SQL with its parameters (token keys among them) stays out of the logs even at DEBUG.
    "loggers": {
        "django.server": {"handlers": ["django.server"], "level": "INFO", "propagate": False},
        "django.db.backends": {"level": "INFO"},
        # httpx logs every request at INFO: not from inside a measurement's read loop.
        "httpx": {"level": "WARNING"},
        "httpcore": {"level": "WARNING"},
    },
}

# The lab federation (workers.lab): where its servers keep their state and data.
FEDPROBE_LAB_DIR = Path(env_str("FEDPROBE_LAB_DIR", "/tmp/fedprobe-lab"))
# file:// endpoints may only name files under these folders (after resolving symlinks).
FEDPROBE_FILE_ROOTS = env_list("FEDPROBE_FILE_ROOTS", [str(FEDPROBE_LAB_DIR / "data")])
# The endpoint egress policy (workers.engine.egress): workers never connect to link-local or
# cloud metadata addresses, and to loopback or private ones only inside these networks. The
# embedded default allows loopback (the lab); production allows none unless set.
FEDPROBE_EGRESS_ALLOW = env_networks(
    "FEDPROBE_EGRESS_ALLOW", [] if PRODUCTION else ["127.0.0.0/8", "::1/128"]
)
# The CA folder (hashed OpenSSL layout) workers verify TLS servers against, always: the
# grid's /etc/grid-security/certificates (IGTF trust anchors, kept fresh by fetch-crl) in
# production. Unset, the engine uses that folder when the host has it, else the system
# store; the embedded mode uses LOCAL_CA_DIR when `lab register` made it: the host's CAs
# plus the lab's, so that both real sites and the lab's TLS sites verify.
LOCAL_CA_DIR = VAR_DIR / "ca"  # webapp.sites.services.local_ca_dir()
FEDPROBE_CA_DIR = env_str("FEDPROBE_CA_DIR", "") or (
    str(LOCAL_CA_DIR) if not PRODUCTION and LOCAL_CA_DIR.is_dir() else None
)
if FEDPROBE_CA_DIR is not None and not Path(FEDPROBE_CA_DIR).is_dir():
    raise ImproperlyConfigured(f"FEDPROBE_CA_DIR={FEDPROBE_CA_DIR!r} is not a folder")
# The most runs one launch of a campaign may create.
FEDPROBE_MAX_MATRIX = env_int("FEDPROBE_MAX_MATRIX", 1000)
# A credential of a scheduled campaign's endpoint that expires within this many days is
# warned about (campaign preview, home, the watch): webapp/watch/credentials.py.
FEDPROBE_CREDENTIAL_WARN_DAYS = env_int("FEDPROBE_CREDENTIAL_WARN_DAYS", 7)
# Advice (webapp/advice; docs/advice.md) resting on runs older than this many days says it is
# stale.
FEDPROBE_ADVICE_MAX_AGE_DAYS = env_int("FEDPROBE_ADVICE_MAX_AGE_DAYS", 14)
# Schedules (webapp/campaigns/schedules.py; docs/workers.md): a slot missed by up to this
# many seconds (beat was down) is still launched, once; older slots are skipped.
FEDPROBE_SCHEDULE_CATCHUP_S = env_int("FEDPROBE_SCHEDULE_CATCHUP_S", 6 * 3600)
# A run still queued this long after it was sent, while no worker of its vantage point took
# anything, is sent again (its message may have been lost); after this many sends in all it
# is failed ("no worker took the run").
FEDPROBE_RESEND_AFTER_S = env_int("FEDPROBE_RESEND_AFTER_S", 300)
FEDPROBE_RESEND_MAX_SENDS = env_int("FEDPROBE_RESEND_MAX_SENDS", 3)
# Worker health (webapp/campaigns/health.py; docs/workers.md): each worker writes a heartbeat row
# per queue it consumes this often, and counts as gone once its last one is this old.
FEDPROBE_WORKER_HEARTBEAT_S = env_int("FEDPROBE_WORKER_HEARTBEAT_S", 30)
# Remote vantage points' broker accounts (webapp/sites/broker_accounts.py): RabbitMQ's
# management API with an administrator's credentials, and the address agents connect to.
FEDPROBE_BROKER_ADMIN_URL = env_str("FEDPROBE_BROKER_ADMIN_URL", "")
FEDPROBE_AGENT_BROKER_URL = env_str("FEDPROBE_AGENT_BROKER_URL", "")
if FEDPROBE_AGENT_BROKER_URL and not FEDPROBE_AGENT_BROKER_URL.startswith(("amqp://", "amqps://")):
    raise ImproperlyConfigured(
        "FEDPROBE_AGENT_BROKER_URL must be an amqps:// (or amqp://) URL of the RabbitMQ broker "
        "agents connect to, without user or password"
    )
# GET /metrics (docs/monitoring.md): a scraper that sends this bearer token, or one from these
# networks (the client address as the throttles count it, FEDPROBE_NUM_PROXIES), may read it;
# with neither set, /metrics is off (404).
FEDPROBE_METRICS_TOKEN = env_secret("FEDPROBE_METRICS_TOKEN", required=False, min_length=32)
FEDPROBE_METRICS_ALLOW = env_networks("FEDPROBE_METRICS_ALLOW", [])
FEDPROBE_WORKER_STALE_S = env_int("FEDPROBE_WORKER_STALE_S", 120)
# The reaper (webapp.campaigns.services.runs_reap; docs/workers.md#when-a-worker-dies): a
# running client whose heartbeat is this old is lost (its worker died). Beat sends the reaper
# and the resend pass above this often.
FEDPROBE_REAPER_STALE_S = env_int("FEDPROBE_REAPER_STALE_S", 60)
FEDPROBE_REAPER_PERIOD_S = env_int("FEDPROBE_REAPER_PERIOD_S", 30)
FEDPROBE_RESEND_PERIOD_S = env_int("FEDPROBE_RESEND_PERIOD_S", 60)
# What a lost write or copy run left is deleted by a worker (or the agent) of its vantage
# point, tried this many times at most, the n-th failure waiting FEDPROBE_CLEANUP_RETRY_S *
# 2**(n-1) before the next (webapp.campaigns.cleanups; docs/workers.md#when-a-worker-dies).
FEDPROBE_CLEANUP_MAX_ATTEMPTS = env_int("FEDPROBE_CLEANUP_MAX_ATTEMPTS", 5)
FEDPROBE_CLEANUP_RETRY_S = env_int("FEDPROBE_CLEANUP_RETRY_S", 60)
# How often a running client beats (webapp.campaigns.services.HEARTBEAT_S).
_CLIENT_HEARTBEAT_S = 2
for _name in (
    "FEDPROBE_SCHEDULE_CATCHUP_S",
    "FEDPROBE_RESEND_AFTER_S",
    "FEDPROBE_RESEND_MAX_SENDS",
    "FEDPROBE_RESEND_PERIOD_S",
    "FEDPROBE_WORKER_HEARTBEAT_S",
    "FEDPROBE_WORKER_STALE_S",
    "FEDPROBE_REAPER_PERIOD_S",
    "FEDPROBE_CLEANUP_MAX_ATTEMPTS",
    "FEDPROBE_CLEANUP_RETRY_S",
):
    if globals()[_name] < 1:
        raise ImproperlyConfigured(f"{_name} must be at least 1")
if FEDPROBE_WORKER_STALE_S <= FEDPROBE_WORKER_HEARTBEAT_S:
    raise ImproperlyConfigured(
        "FEDPROBE_WORKER_STALE_S must be more than FEDPROBE_WORKER_HEARTBEAT_S: a live worker "
        "would show as gone between its heartbeats"
    )
if FEDPROBE_REAPER_STALE_S <= _CLIENT_HEARTBEAT_S:
    raise ImproperlyConfigured(
        f"FEDPROBE_REAPER_STALE_S must be more than {_CLIENT_HEARTBEAT_S} (how often a running "
        "client beats): the reaper would end live runs"
    )

# Notifications (webapp/notifications; docs/watch.md, "Notifications"). Links in messages are
# absolute: FEDPROBE_BASE_URL is the address users open the site at (default: https:// and the
# first of FEDPROBE_ALLOWED_HOSTS in production, runserver's address otherwise).
FEDPROBE_BASE_URL = (
    env_str("FEDPROBE_BASE_URL", "")
    or (f"https://{ALLOWED_HOSTS[0].lstrip('.')}" if PRODUCTION else "http://127.0.0.1:8000")
).rstrip("/")
if not FEDPROBE_BASE_URL.startswith(("http://", "https://")):
    raise ImproperlyConfigured("FEDPROBE_BASE_URL must be an http:// or https:// URL")
FEDPROBE_EMAIL_FROM = env_str("FEDPROBE_EMAIL_FROM", "fedprobe@localhost")
DEFAULT_FROM_EMAIL = FEDPROBE_EMAIL_FROM
# SMTP, as Django's mail framework reads it. Without EMAIL_HOST in the embedded mode, mail is
# written to the console (the worker's log) instead of being sent; production sends to
# EMAIL_HOST (default localhost:25).
_email_host = env_str("EMAIL_HOST", "")
EMAIL_HOST = _email_host or "localhost"
EMAIL_PORT = env_int("EMAIL_PORT", 25)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", False)
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 10)
EMAIL_BACKEND = env_str(
    "EMAIL_BACKEND",
    "django.core.mail.backends.smtp.EmailBackend"
    if _email_host or PRODUCTION
    else "django.core.mail.backends.console.EmailBackend",
)
if EMAIL_USE_TLS and EMAIL_USE_SSL:
    raise ImproperlyConfigured("EMAIL_USE_TLS and EMAIL_USE_SSL are exclusive: set one")
# A webhook's request gives up after this many seconds.
FEDPROBE_NOTIFY_TIMEOUT_S = env_int("FEDPROBE_NOTIFY_TIMEOUT_S", 10)
# A failed attempt is tried again after RETRY_BASE_S, doubling up to RETRY_CAP_S; a delivery
# still not sent MAX_AGE_S after it was made is failed (shown to admins).
FEDPROBE_NOTIFY_RETRY_BASE_S = env_int("FEDPROBE_NOTIFY_RETRY_BASE_S", 30)
FEDPROBE_NOTIFY_RETRY_CAP_S = env_int("FEDPROBE_NOTIFY_RETRY_CAP_S", 3600)
FEDPROBE_NOTIFY_MAX_AGE_S = env_int("FEDPROBE_NOTIFY_MAX_AGE_S", 24 * 3600)
# A claimed delivery whose worker died is tried again once its lease ended.
FEDPROBE_NOTIFY_LEASE_S = env_int("FEDPROBE_NOTIFY_LEASE_S", 120)
FEDPROBE_NOTIFY_PUMP_S = env_int("FEDPROBE_NOTIFY_PUMP_S", 15)
# The daily digest of the previous UTC day is made at this UTC hour.
FEDPROBE_DIGEST_HOUR = env_int("FEDPROBE_DIGEST_HOUR", 7)
for _name in (
    "EMAIL_TIMEOUT",
    "FEDPROBE_NOTIFY_TIMEOUT_S",
    "FEDPROBE_NOTIFY_RETRY_BASE_S",
    "FEDPROBE_NOTIFY_RETRY_CAP_S",
    "FEDPROBE_NOTIFY_MAX_AGE_S",
    "FEDPROBE_NOTIFY_LEASE_S",
    "FEDPROBE_NOTIFY_PUMP_S",
):
    if globals()[_name] < 1:
        raise ImproperlyConfigured(f"{_name} must be at least 1")
if FEDPROBE_NOTIFY_LEASE_S <= FEDPROBE_NOTIFY_TIMEOUT_S + EMAIL_TIMEOUT:
    raise ImproperlyConfigured(
        "FEDPROBE_NOTIFY_LEASE_S must be more than FEDPROBE_NOTIFY_TIMEOUT_S + EMAIL_TIMEOUT: "
        "a delivery still being sent would be claimed again"
    )
if not 0 <= FEDPROBE_DIGEST_HOUR <= 23:
    raise ImproperlyConfigured("FEDPROBE_DIGEST_HOUR must be an hour, 0 to 23 (UTC)")

# Topology and downtimes from GOCDB and CRIC (webapp/sites/topology.py, downtime_import.py;
# docs/topology.md). A registry's URL is fetched within the egress policy, giving up after
# REGISTRY_TIMEOUT_S; GOCDB's protected methods need an X.509 client certificate: a PEM file
# with the certificate (and its key, or the key in REGISTRY_KEY), never printed.
FEDPROBE_REGISTRY_TIMEOUT_S = env_int("FEDPROBE_REGISTRY_TIMEOUT_S", 60)
FEDPROBE_REGISTRY_CERT = env_str("FEDPROBE_REGISTRY_CERT", "")
FEDPROBE_REGISTRY_KEY = env_str("FEDPROBE_REGISTRY_KEY", "")
for _name in ("FEDPROBE_REGISTRY_CERT", "FEDPROBE_REGISTRY_KEY"):
    if globals()[_name] and not Path(globals()[_name]).is_file():
        raise ImproperlyConfigured(f"{_name}={globals()[_name]!r} is not a file")
if FEDPROBE_REGISTRY_TIMEOUT_S < 1:
    raise ImproperlyConfigured("FEDPROBE_REGISTRY_TIMEOUT_S must be at least 1")
# GOCDB's get_downtime URL whose ongoing and future downtimes beat imports every
# GOCDB_DOWNTIME_PERIOD_S seconds (unset: no refresh).
FEDPROBE_GOCDB_DOWNTIME_URL = env_str("FEDPROBE_GOCDB_DOWNTIME_URL", "")
FEDPROBE_GOCDB_DOWNTIME_PERIOD_S = env_int("FEDPROBE_GOCDB_DOWNTIME_PERIOD_S", 900)
if FEDPROBE_GOCDB_DOWNTIME_URL and not FEDPROBE_GOCDB_DOWNTIME_URL.startswith(
    ("https://", "http://")
):
    raise ImproperlyConfigured("FEDPROBE_GOCDB_DOWNTIME_URL must be an http(s):// URL")
if FEDPROBE_GOCDB_DOWNTIME_PERIOD_S < 60:
    raise ImproperlyConfigured("FEDPROBE_GOCDB_DOWNTIME_PERIOD_S must be at least 60")
# Archivers (webapp/archivers; docs/archivers.md): each finished run's JSON pushed to HTTP
# receivers and AMQP exchanges. The pump's period, and the lease of a claimed delivery (a
# worker that died while sending: sent again once it ends); an attempt's steps are each bounded
# by the archiver's timeout_s (at most 60 s), so the lease outlasts any attempt.
FEDPROBE_ARCHIVE_PUMP_S = env_int("FEDPROBE_ARCHIVE_PUMP_S", 15)
FEDPROBE_ARCHIVE_LEASE_S = env_int("FEDPROBE_ARCHIVE_LEASE_S", 300)
if FEDPROBE_ARCHIVE_PUMP_S < 1:
    raise ImproperlyConfigured("FEDPROBE_ARCHIVE_PUMP_S must be at least 1")
if FEDPROBE_ARCHIVE_LEASE_S < 4 * 60 + 10:
    raise ImproperlyConfigured(
        "FEDPROBE_ARCHIVE_LEASE_S must be at least 250: an attempt (connect, send, answer, "
        "confirm) may take four times an archiver's timeout, 60 s at most"
    )

# The nightly watch (webapp/watch; docs/watch.md). A regression recovering this many good
# nights in a row is resolved; a series not measured for this many nights on which its
# vantage point measured others has no data (docs/watch.md#no-data).
FEDPROBE_WATCH_RESOLVE_AFTER_NIGHTS = env_int("FEDPROBE_WATCH_RESOLVE_AFTER_NIGHTS", 3)
FEDPROBE_WATCH_NO_DATA_NIGHTS = env_int("FEDPROBE_WATCH_NO_DATA_NIGHTS", 2)
# The nights of a series the detector reads, and the missed nights a late pass replays.
FEDPROBE_WATCH_LOOKBACK_NIGHTS = env_int("FEDPROBE_WATCH_LOOKBACK_NIGHTS", 60)
FEDPROBE_WATCH_CATCHUP_NIGHTS = env_int("FEDPROBE_WATCH_CATCHUP_NIGHTS", 7)
# The first pass over a history rolls up the lookback's nights only; each pass after it rolls
# up this many of the older nights (newest first) until the history is rolled up.
FEDPROBE_WATCH_BACKFILL_NIGHTS = env_int("FEDPROBE_WATCH_BACKFILL_NIGHTS", 28)
# The rollup's statements (a fortnight of nights each) run on up to this many database
# connections at once when a pass rolls up several (the first pass, the backfill): PostgreSQL
# computes each on a core of its own. 1: one after the other. (SQLite: always one.)
FEDPROBE_WATCH_ROLLUP_CONNECTIONS = env_int("FEDPROBE_WATCH_ROLLUP_CONNECTIONS", 2)
# The pass reads the series of this many endpoints at a time (memory stays bounded).
FEDPROBE_WATCH_ENDPOINTS_PER_READ = env_int("FEDPROBE_WATCH_ENDPOINTS_PER_READ", 50)
# The run metrics the watch runs the detector on (each is a series of its own).
FEDPROBE_WATCH_METRICS = env_list(
    "FEDPROBE_WATCH_METRICS", ["throughput_mbps", "open_s", "ttfb_s", "latency_p99_us"]
)
# The run metrics GET /metrics exports per series (docs/monitoring.md): each is 15,000 samples
# at 500 endpoints x 10 parameter sets x 3 vantage points. "all": every run metric.
# Set but empty (compose passes it on so): the default.
FEDPROBE_METRICS_SERIES_METRICS = (
    env_list("FEDPROBE_METRICS_SERIES_METRICS", []) or FEDPROBE_WATCH_METRICS
)
# A metric's regression is good again on a night within this many percent of its baseline.
FEDPROBE_WATCH_RECOVERED_PCT = env_int("FEDPROBE_WATCH_RECOVERED_PCT", 10)
# An error class's series (docs/watch.md#error-classes) is bad on a night when at least this
# many runs failed with it and its share of the runs rose this many percentage points above
# its usual band.
FEDPROBE_WATCH_ERROR_MIN_RUNS = env_int("FEDPROBE_WATCH_ERROR_MIN_RUNS", 2)
FEDPROBE_WATCH_ERROR_MIN_SHARE_PCT = env_int("FEDPROBE_WATCH_ERROR_MIN_SHARE_PCT", 10)
# A series without a live regression has no data once it stopped (above) after being
# measured on at least this many nights of the lookback window.
FEDPROBE_WATCH_NO_DATA_MIN_NIGHTS = env_int("FEDPROBE_WATCH_NO_DATA_MIN_NIGHTS", 3)
# Blame (docs/watch.md#whose-fault-it-is): a vantage point, credential or protocol is blamed
# when bad at this many sites and this share (percent) of what it measured; a site when bad
# from every vantage point that measured it, if at least this many did.
FEDPROBE_WATCH_BLAME_MIN_SITES = env_int("FEDPROBE_WATCH_BLAME_MIN_SITES", 3)
FEDPROBE_WATCH_BLAME_MIN_SHARE = env_int("FEDPROBE_WATCH_BLAME_MIN_SHARE_PCT", 50) / 100
FEDPROBE_WATCH_BLAME_SITE_MIN_VANTAGE_POINTS = env_int(
    "FEDPROBE_WATCH_BLAME_SITE_MIN_VANTAGE_POINTS", 2
)
# A server version first seen within this many nights of a change is named on it.
FEDPROBE_WATCH_VERSION_NIGHTS = env_int("FEDPROBE_WATCH_VERSION_NIGHTS", 3)
# Runs queued this long while no worker of their vantage point is alive: not run.
FEDPROBE_WATCH_NOT_RUN_AFTER_S = env_int("FEDPROBE_WATCH_NOT_RUN_AFTER_S", 2 * 3600)
# Runs that no worker took (failed by the resend pass) or lost within this long, with no
# worker of their vantage point alive: not run (a day: the pass after a night sees them).
FEDPROBE_WATCH_NOT_RUN_WINDOW_S = env_int("FEDPROBE_WATCH_NOT_RUN_WINDOW_S", 24 * 3600)
# Beat runs the pass every hour at this minute (idempotent, cheap when nothing changed).
FEDPROBE_WATCH_MINUTE = env_int("FEDPROBE_WATCH_MINUTE", 45)
for _name in (
    "FEDPROBE_WATCH_RESOLVE_AFTER_NIGHTS",
    "FEDPROBE_WATCH_NO_DATA_NIGHTS",
    "FEDPROBE_WATCH_LOOKBACK_NIGHTS",
    "FEDPROBE_WATCH_CATCHUP_NIGHTS",
    "FEDPROBE_WATCH_BACKFILL_NIGHTS",
    "FEDPROBE_WATCH_ROLLUP_CONNECTIONS",
    "FEDPROBE_WATCH_ENDPOINTS_PER_READ",
    "FEDPROBE_WATCH_BLAME_MIN_SITES",
    "FEDPROBE_WATCH_BLAME_SITE_MIN_VANTAGE_POINTS",
    "FEDPROBE_WATCH_NOT_RUN_AFTER_S",
    "FEDPROBE_WATCH_NOT_RUN_WINDOW_S",
    "FEDPROBE_WATCH_ERROR_MIN_RUNS",
    "FEDPROBE_WATCH_ERROR_MIN_SHARE_PCT",
    "FEDPROBE_WATCH_NO_DATA_MIN_NIGHTS",
):
    if globals()[_name] < 1:
        raise ImproperlyConfigured(f"{_name} must be at least 1")
if not 0 < FEDPROBE_WATCH_BLAME_MIN_SHARE <= 1:
    raise ImproperlyConfigured("FEDPROBE_WATCH_BLAME_MIN_SHARE_PCT must be 1 to 100")
if not 0 <= FEDPROBE_WATCH_MINUTE < 60:
    raise ImproperlyConfigured("FEDPROBE_WATCH_MINUTE must be 0 to 59")


# Celery (webapp/celery.py; docs/workers.md). The broker only carries "measure run N" and
# control messages: state lives in our rows, so there is no result backend.
# FEDPROBE_BROKER_URL is a Redis URL (redis://127.0.0.1:6379/0) or a RabbitMQ one
# (amqps://fedprobe:PASSWORD@broker.example.org:5671/fedprobe: the broker remote vantage
# points need, docs/vantage-points.md). Unset, the embedded default is kombu's filesystem
# transport in VAR_DIR/broker: no server, works between the processes of one host (one worker
# per queue: a message is taken by moving its file).
_REDIS_SCHEMES = ("redis://", "rediss://", "redis+socket://")
_AMQP_SCHEMES = ("amqp://", "amqps://")
_BROKER_SCHEMES = _REDIS_SCHEMES + _AMQP_SCHEMES
_broker_url = env_str("FEDPROBE_BROKER_URL", "")
if _broker_url.startswith(_AMQP_SCHEMES):
    CELERY_BROKER_URL = _broker_url
    CELERY_BROKER_USE_SSL = amqp_tls_options(_broker_url, env_str("FEDPROBE_BROKER_CA_FILE", ""))
    # A publish (enqueue on commit, in a web request) must not wait forever on a broker that
    # vanished; a consumer notices a dead connection by AMQP heartbeats.
    CELERY_BROKER_CONNECTION_TIMEOUT = 5
    CELERY_BROKER_HEARTBEAT = 30
    CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {
        # A message the broker did not take fails the send, rather than vanish.
        "confirm_publish": True,
    }
elif _broker_url:
    if not _broker_url.startswith(_REDIS_SCHEMES):
        raise ImproperlyConfigured(
            f"FEDPROBE_BROKER_URL must be a {', '.join(_BROKER_SCHEMES)} URL, or unset for the "
            "embedded broker"
        )
    _visibility_timeout_s = env_int("FEDPROBE_BROKER_VISIBILITY_TIMEOUT_S", 900)
    if _visibility_timeout_s < 1:
        raise ImproperlyConfigured("FEDPROBE_BROKER_VISIBILITY_TIMEOUT_S must be at least 1")
    CELERY_BROKER_URL = _broker_url
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        # An unacked message (its worker died) returns to the queue after this. It does not
        # matter for runs: a redelivered run was already claimed and is left alone, and runs
        # lost mid-measurement are ended by the reaper, never by redelivery. It only brings
        # back a message whose worker died before claiming its run.
        "visibility_timeout": _visibility_timeout_s,
        # A publish (enqueue on commit, in a web request) must not wait forever on a broker
        # that vanished without closing the connection.
        "socket_connect_timeout": 5,
        "socket_timeout": 30,
    }
else:
    _broker_dir = private_dir(private_dir(VAR_DIR) / "broker")
    for _folder in ("queues", "control"):
        private_dir(_broker_dir / _folder)
    CELERY_BROKER_URL = "filesystem://localhost/"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "queues"),
        "data_folder_out": str(_broker_dir / "queues"),
        "control_folder": str(_broker_dir / "control"),
    }
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_CONNECTION_MAX_RETRIES = None  # a worker host rides out a broker restart
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
# A measurement is never retried blindly (a re-run skews timing): acked after it ran, not
# requeued when its worker process dies (the reaper ends that run), one message at a time.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = False
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# One measurement at a time per host: a second concurrent run would disturb the first.
CELERY_WORKER_CONCURRENCY = 1
# A broker blip must not cancel a measurement: its results go to PostgreSQL.
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
# Measurements go to their vantage point's queue, named when sent (webapp.campaigns.dispatch).
CELERY_TASK_ROUTES = {
    name: {"queue": "control"}
    for name in (
        "fedprobe.reap_runs",
        "fedprobe.launch_due_campaigns",
        "fedprobe.resend_runs",
        "fedprobe.watch",
        "fedprobe.downtimes_refresh",
    )
}
# Notifications have their own queue: a receiver that is slow or down never delays a
# measurement or a control task (docs/watch.md, "Notifications").
CELERY_TASK_ROUTES["fedprobe.notify_pump"] = {"queue": "notify"}
# Archiving leaves fedprobe too: the same queue, never a measurement's (docs/archivers.md).
CELERY_TASK_ROUTES["fedprobe.archive_pump"] = {"queue": "notify"}
# The control tasks are idempotent: after an outage of the control worker, one late pass is
# enough, so their messages expire.
CELERY_BEAT_SCHEDULE = {
    "reap-runs": {
        "task": "fedprobe.reap_runs",
        "schedule": float(FEDPROBE_REAPER_PERIOD_S),
        "options": {"expires": 120},
    },
    # Each minute, whatever the schedules' cron strings name; a slot is launched once even
    # with two beats (a unique row per campaign and slot).
    "launch-due-campaigns": {
        "task": "fedprobe.launch_due_campaigns",
        "schedule": 60.0,
        "options": {"expires": 120},
    },
    "resend-runs": {
        "task": "fedprobe.resend_runs",
        "schedule": float(FEDPROBE_RESEND_PERIOD_S),
        "options": {"expires": 120},
    },
    # The watch's pass, after each night's runs (docs/watch.md): hourly, since a pass with
    # nothing new is cheap and a late run re-rolls its night.
    "watch": {
        "task": "fedprobe.watch",
        "schedule": crontab(minute=FEDPROBE_WATCH_MINUTE),
        "options": {"expires": 3000},
    },
}
# Notifications: events fanned out, digests made at their hour, due deliveries sent. A pass
# claims each delivery before it sends it: two passes never send one twice.
CELERY_BEAT_SCHEDULE["notify-pump"] = {
    "task": "fedprobe.notify_pump",
    "schedule": float(FEDPROBE_NOTIFY_PUMP_S),
    "options": {"expires": max(2 * FEDPROBE_NOTIFY_PUMP_S, 60)},
}
# GOCDB's downtimes, when a feed is set (docs/topology.md "Downtimes"): each pass imports the
# whole feed again, so a late or missed one loses nothing.
if FEDPROBE_GOCDB_DOWNTIME_URL:
    CELERY_BEAT_SCHEDULE["downtimes-refresh"] = {
        "task": "fedprobe.downtimes_refresh",
        "schedule": float(FEDPROBE_GOCDB_DOWNTIME_PERIOD_S),
        "options": {"expires": FEDPROBE_GOCDB_DOWNTIME_PERIOD_S},
    }
# Archivers: new finished runs' deliveries made, due ones sent (each claimed before it is sent).
CELERY_BEAT_SCHEDULE["archive-pump"] = {
    "task": "fedprobe.archive_pump",
    "schedule": float(FEDPROBE_ARCHIVE_PUMP_S),
    "options": {"expires": max(2 * FEDPROBE_ARCHIVE_PUMP_S, 60)},
}
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
CELERY_BEAT_SCHEDULER = "webapp.celery:Scheduler"
