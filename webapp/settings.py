"""Settings for fedprobe, read from the environment.

With nothing set, fedprobe runs with safe local defaults: SQLite in ./var/,
DEBUG off, loopback-only hosts. Malformed values fail loudly at start-up.
"""

import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("FEDPROBE_VAR_DIR", BASE_DIR / "var"))


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


DEBUG = env_bool("FEDPROBE_DEBUG", False)
SECRET_KEY = os.environ.get("FEDPROBE_SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG and env_bool("FEDPROBE_PRODUCTION", False):
        raise ImproperlyConfigured("FEDPROBE_SECRET_KEY must be set in production")
    SECRET_KEY = "insecure-local-only-key-set-FEDPROBE_SECRET_KEY-in-production"
ALLOWED_HOSTS = env_list("FEDPROBE_ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "webapp.core",
    "webapp.sites",
    "webapp.campaigns",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

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
            ],
        },
    },
]


def _database_from_url(url: str) -> dict[str, object]:
    from urllib.parse import unquote, urlparse

    parsed = urlparse(url)
    if parsed.scheme not in {"postgres", "postgresql"}:
        raise ImproperlyConfigured(f"DATABASE_URL scheme {parsed.scheme!r} is not supported")
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": parsed.path.lstrip("/"),
        "USER": unquote(parsed.username or ""),
        "PASSWORD": unquote(parsed.password or ""),
        "HOST": parsed.hostname or "",
        "PORT": str(parsed.port or ""),
    }


_database_url = os.environ.get("DATABASE_URL")
if not _database_url:
    VAR_DIR.mkdir(parents=True, exist_ok=True)
DATABASES = {
    "default": _database_from_url(_database_url)
    if _database_url
    else {"ENGINE": "django.db.backends.sqlite3", "NAME": VAR_DIR / "fedprobe.sqlite3"}
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env_str("FEDPROBE_STATIC_ROOT", str(BASE_DIR / "static-collected")))

# The lab federation (workers.lab): where its servers keep their state and data.
FEDPROBE_LAB_DIR = Path(env_str("FEDPROBE_LAB_DIR", "/tmp/fedprobe-lab"))
# file:// endpoints may only name files under these folders (after resolving symlinks).
FEDPROBE_FILE_ROOTS = env_list("FEDPROBE_FILE_ROOTS", [str(FEDPROBE_LAB_DIR / "data")])
# The most runs one launch of a campaign may create.
FEDPROBE_MAX_MATRIX = env_int("FEDPROBE_MAX_MATRIX", 1000)
