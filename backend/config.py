"""Configuration from the environment (and `.env`), as DESIGN §3 lists it.

Every setting is read once per process through :func:`get_settings`; tests that need other
values set environment variables before the process starts or call
:func:`reset_settings_cache`.
"""

from __future__ import annotations

import functools
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from dotenv import load_dotenv

PROJECT_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Settings:
    """The process-wide configuration.

    Attributes:
        db_url: SQLAlchemy URL of the main database.
        data_dir: Folder for the SQLite file, the generated secret key and other local state.
        secret_key: Key that signs sessions and encrypts secrets at rest.
        admin_user: Username of the first system administrator.
        admin_password: Their password, or None to generate one at first start.
        login_token_hours: Lifetime of a login token.
        oidc_issuer: Issuer URL of the OpenID Connect provider for single sign-on, or None.
        oidc_client_id: Client id registered at that provider, or None.
        oidc_client_secret: Its client secret, or None.
        oidc_mandate: Name of the mandate new single sign-on users join.
        oidc_roles: Mandate role labels new single sign-on users get.
        ui_url: Where the browser UI lives (the sign-on result is sent there).
        api_url: Public URL of the API (the provider redirects back to it).
        openai_api_key: Key of the default AI provider (OPENAI_API_KEY), or None: AI steps
            then fail with a message naming the setting.
        openai_base_url: Base URL of any OpenAI-compatible endpoint (OPENAI_BASE_URL), or None
            for api.openai.com.
        ai_model: Default chat model (POWERON_AI_MODEL), or None for the client's default.
        ai_image_model: Model for image generation (POWERON_AI_IMAGE_MODEL), or None.
        ai_speech_model: Model for text to speech (POWERON_AI_SPEECH_MODEL), or None.
        ai_transcription_model: Model for speech to text (POWERON_AI_TRANSCRIPTION_MODEL), or None.
        ai_timeout_seconds: How long one call to the AI provider may take.
        neutralize_names: Names that neutralisation always replaces (POWERON_NEUTRALIZE_NAMES).
        search_url: Base URL of a SearXNG-compatible search API for `core.webSearch`, or None.
        readurl_allow_private: Let `core.readUrl` fetch private, loopback and link-local
            addresses (off by default; tests against local servers turn it on).
    """

    db_url: str
    data_dir: Path
    secret_key: str
    admin_user: str
    admin_password: str | None
    login_token_hours: int = 12
    oidc_issuer: str | None = None
    oidc_client_id: str | None = None
    oidc_client_secret: str | None = None
    oidc_mandate: str = "Default"
    oidc_roles: tuple[str, ...] = ("user",)
    ui_url: str = "http://localhost:3000"
    api_url: str = "http://localhost:8000"
    openai_api_key: str | None = None
    openai_base_url: str | None = None
    ai_model: str | None = None
    ai_image_model: str | None = None
    ai_speech_model: str | None = None
    ai_transcription_model: str | None = None
    ai_timeout_seconds: float = 60.0
    neutralize_names: tuple[str, ...] = ()
    search_url: str | None = None
    readurl_allow_private: bool = False
    file_max_bytes: int = 20 * 1024 * 1024
    instance_quota_bytes: int = 1024 * 1024 * 1024

    @property
    def sso_enabled(self) -> bool:
        """Single sign-on is on when issuer, client id and client secret are all set."""
        return bool(self.oidc_issuer and self.oidc_client_id and self.oidc_client_secret)


def _data_dir() -> Path:
    configured = os.environ.get("POWERON_DATA_DIR")
    path = Path(configured) if configured else PROJECT_ROOT / "data"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _secret_key(data_dir: Path) -> str:
    """The configured key, else the one generated into data/secret.key at first use."""
    configured = os.environ.get("POWERON_SECRET_KEY")
    if configured:
        return configured
    key_file = data_dir / "secret.key"
    if not key_file.exists():
        key_file.touch(mode=0o600)
        key_file.write_text(secrets.token_urlsafe(48))
    return key_file.read_text().strip()


def _normalise_db_url(url: str) -> str:
    """Accept the plain `postgresql://` form and use the psycopg 3 driver for it."""
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def _csv(value: str | None, default: tuple[str, ...]) -> tuple[str, ...]:
    """The non-empty items of a comma-separated setting, or `default` when there are none."""
    items = tuple(item.strip() for item in (value or "").split(",") if item.strip())
    return items or default


def _flag(value: str | None) -> bool:
    """A yes/no setting: 1, true, yes and on (any case) mean yes."""
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


def _text(name: str, rstrip: str = "") -> str | None:
    """A text setting, stripped; None when unset or blank."""
    value = (os.environ.get(name) or "").strip().rstrip(rstrip)
    return value or None


def _bytes(name: str, default: int) -> int:
    """A positive whole number of bytes (underscores allowed: 20_000_000)."""
    raw = _text(name)
    if raw is None:
        return default
    try:
        value = int(raw.replace("_", ""))
    except ValueError:
        raise ValueError(f"{name} must be a whole number of bytes, not {raw!r}") from None
    if value <= 0:
        raise ValueError(f"{name} must be positive, not {value}")
    return value


@functools.cache
def get_settings() -> Settings:
    """Read the configuration once per process."""
    load_dotenv(PROJECT_ROOT / ".env", override=False)
    data_dir = _data_dir()
    default_db = f"sqlite:///{data_dir / 'poweron.db'}"
    return Settings(
        db_url=_normalise_db_url(os.environ.get("POWERON_DB_URL") or default_db),
        data_dir=data_dir,
        secret_key=_secret_key(data_dir),
        admin_user=os.environ.get("POWERON_ADMIN_USER") or "admin",
        admin_password=os.environ.get("POWERON_ADMIN_PASSWORD") or None,
        login_token_hours=int(os.environ.get("POWERON_LOGIN_TOKEN_HOURS", "12")),
        oidc_issuer=_text("POWERON_OIDC_ISSUER"),
        oidc_client_id=_text("POWERON_OIDC_CLIENT_ID"),
        oidc_client_secret=os.environ.get("POWERON_OIDC_CLIENT_SECRET") or None,
        oidc_mandate=_text("POWERON_OIDC_MANDATE") or "Default",
        oidc_roles=_csv(os.environ.get("POWERON_OIDC_ROLES"), default=("user",)),
        ui_url=_text("POWERON_UI_URL", rstrip="/") or "http://localhost:3000",
        api_url=_text("POWERON_API_URL", rstrip="/") or "http://localhost:8000",
        openai_api_key=_text("OPENAI_API_KEY"),
        openai_base_url=_text("OPENAI_BASE_URL", rstrip="/"),
        ai_model=_text("POWERON_AI_MODEL"),
        ai_image_model=_text("POWERON_AI_IMAGE_MODEL"),
        ai_speech_model=_text("POWERON_AI_SPEECH_MODEL"),
        ai_transcription_model=_text("POWERON_AI_TRANSCRIPTION_MODEL"),
        ai_timeout_seconds=float(os.environ.get("POWERON_AI_TIMEOUT_SECONDS") or "60"),
        neutralize_names=_csv(os.environ.get("POWERON_NEUTRALIZE_NAMES"), default=()),
        search_url=_text("POWERON_SEARCH_URL", rstrip="/"),
        readurl_allow_private=_flag(os.environ.get("POWERON_READURL_ALLOW_PRIVATE")),
        file_max_bytes=_bytes("POWERON_FILE_MAX_BYTES", 20 * 1024 * 1024),
        instance_quota_bytes=_bytes("POWERON_INSTANCE_QUOTA_BYTES", 1024 * 1024 * 1024),
    )


def reset_settings_cache() -> None:
    """Forget the cached settings (tests that change the environment call this)."""
    get_settings.cache_clear()
