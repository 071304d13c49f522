"""Configuration from the environment (and `.env`), as DESIGN §3 lists it.

Every setting is read once per process through :func:`get_settings`; tests that need other
values set environment variables before the process starts or call
:func:`reset_settings_cache`.
"""

from __future__ import annotations

import functools
import json
import math
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dotenv import load_dotenv

PROJECT_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class AiProviderSettings:
    """One OpenAI-compatible AI provider (an item of POWERON_AI_PROVIDERS, or OPENAI_*).

    The API key is left out of `repr` and never put into messages.

    Attributes:
        name: Short name used in messages and traces ("default" for the OPENAI_* provider).
        base_url: Base URL of the endpoint, or None for api.openai.com.
        api_key: The key (secret).
        model: Default chat model, or None for the client's default.
        image_model, speech_model, transcription_model: Models for images and audio, or None.
        timeout_seconds: How long one call to this provider may take.
        models: (requested model, this provider's model) pairs: a caller asking for the
            first gets the second from this provider; other names are sent unchanged.
        prices: (model, CHF per 1M input tokens, CHF per 1M output tokens) triples that
            override the built-in price table for this provider.
        source: The setting it came from ("OPENAI_API_KEY" or "POWERON_AI_PROVIDERS[2]"),
            so that messages can say what to fix.
    """

    name: str
    base_url: str | None
    api_key: str = field(repr=False)
    model: str | None = None
    image_model: str | None = None
    speech_model: str | None = None
    transcription_model: str | None = None
    timeout_seconds: float = 60.0
    models: tuple[tuple[str, str], ...] = ()
    prices: tuple[tuple[str, float, float], ...] = ()
    source: str = "OPENAI_API_KEY"


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
        ai_providers: The AI providers in failover order: POWERON_AI_PROVIDERS when set
            (OPENAI_* are then not used), else the one provider of OPENAI_API_KEY /
            OPENAI_BASE_URL / POWERON_AI_MODEL, else none.
        ai_neutralize: Neutralise personal data in every chat prompt and restore it in the
            answers (POWERON_AI_NEUTRALIZE); a call can still ask for it or refuse it.
        neutralize_names: Names that neutralisation always replaces (POWERON_NEUTRALIZE_NAMES).
        search_engine: Which engine `core.webSearch` asks (POWERON_SEARCH_ENGINE, one of
            :data:`SEARCH_ENGINES`): ``auto`` (the default) is SearXNG when POWERON_SEARCH_URL is
            set, else ``ddgs`` (the metasearch library: DuckDuckGo and other engines, no
            configuration, no key); ``searxng``, ``brave`` (Brave Search API) or ``tavily``.
        search_url: POWERON_SEARCH_URL, or None: the base URL of a SearXNG-compatible search API;
            for ``brave`` and ``tavily`` the base URL of their API when it is not the public one
            (a stand-in, a gateway).
        search_api_key: The key of the Brave Search API or Tavily (POWERON_SEARCH_API_KEY);
            left out of `repr`, never put into messages.
        search_proxy: A proxy every search request goes through (POWERON_SEARCH_PROXY), e.g.
            ``http://proxy:3128`` or ``socks5://…``, or None.
        search_ca_file: A PEM file of the certificate authorities search requests trust
            (POWERON_SEARCH_CA_FILE, else the standard SSL_CERT_FILE), e.g. for a TLS-inspecting
            proxy; None: the built-in ones.
        search_backends: The engines ddgs asks, comma-separated (POWERON_SEARCH_BACKENDS,
            default ``auto``: ddgs chooses), e.g. ``duckduckgo`` or ``duckduckgo,brave,mojeek``.
        readurl_allow_private: Let `core.readUrl` fetch private, loopback and link-local
            addresses (off by default; tests against local servers turn it on).
        timer_interval_seconds: How often the timer thread looks for due work of paused runs
            (flow.wait, human task timeouts, mailboxes): POWERON_TIMER_INTERVAL_SECONDS.
        mail_max_messages: The most mails one call reads from a mailbox (a listing, a search, the
            new mails one poll of email.checkEmail looks at): POWERON_MAIL_MAX_MESSAGES.
        run_threads: Runs executing at the same time in this process (POWERON_RUN_THREADS).
        run_wait_seconds: How long a request that starts or resumes a run waits for it to come
            to rest before answering with its current state (POWERON_RUN_WAIT_SECONDS).
        scheduler_enabled: Start the scheduler of trigger.schedule nodes in this process
            (POWERON_SCHEDULER, default on; backend/scheduler/).
        scheduler_lease_seconds: Lifetime of the scheduler lease in the database; the leader
            renews it every third of that, another process takes over once it has expired
            (POWERON_SCHEDULER_LEASE_SECONDS).
        scheduler_startup_delay_seconds: Wait before the first full sync after start-up
            (POWERON_SCHEDULER_STARTUP_DELAY_SECONDS; 0 allowed).
        scheduler_misfire_grace_seconds: How late a fire may still run (missed fires of one job
            are coalesced into one run): POWERON_SCHEDULER_MISFIRE_GRACE_SECONDS.
        smtp_url: Where failure notifications are mailed through (POWERON_SMTP_URL), e.g.
            ``smtp://user:password@host:587?starttls=true`` or ``smtps://…:465``; None: no mail.
            It holds a password: left out of `repr`, never logged (backend/notifications/mailer.py).
        smtp_from: The sender address of those mails (POWERON_SMTP_FROM).
        task_link_hours: How long the Approve/Reject links of a task's mail work at most
            (POWERON_TASK_LINK_HOURS; a task due earlier ends them at its due time).
        task_reminder_minutes: How long before a task's due time its recipients are reminded
            once (POWERON_TASK_REMINDER_MINUTES; 0: no reminders).
        max_queued_runs: Webhook, event and form calls are refused with 429 while this many runs
            wait for a run thread (POWERON_MAX_QUEUED_RUNS).
        webhook_max_bytes: Largest body a webhook or public form call may send (413 above it):
            POWERON_WEBHOOK_MAX_BYTES.
        msft_tenant: The Microsoft Entra tenant of Microsoft 365 connections (POWERON_MSFT_TENANT):
            a tenant id or domain, or `organizations` / `common`; None: no such connections.
        msft_client_id: The app registration's application (client) id (POWERON_MSFT_CLIENT_ID).
        msft_client_secret: Its client secret (POWERON_MSFT_CLIENT_SECRET): left out of `repr`,
            never logged.
        msft_authority: The identity platform (POWERON_MSFT_AUTHORITY); tests point it at a stand-in.
        msft_graph_url: Microsoft Graph (POWERON_MSFT_GRAPH_URL), without `/v1.0`.
        graph_timeout_seconds: Longest wait for one Graph or token request (POWERON_GRAPH_TIMEOUT_SECONDS).
        graph_max_pages: Most pages (`@odata.nextLink`) one listing follows (POWERON_GRAPH_MAX_PAGES).
        graph_max_retries: Retries of one request that Graph throttles (429) or finds unavailable
            (503, 504) (POWERON_GRAPH_MAX_RETRIES).
        graph_max_wait_seconds: Longest total wait (Retry-After) for one request before it fails
            naming the throttling (POWERON_GRAPH_MAX_WAIT_SECONDS).
        clickup_api_url: ClickUp's API v2 (POWERON_CLICKUP_API_URL, default
            https://api.clickup.com/api/v2); tests point it at a stand-in.
        clickup_auth_url: ClickUp's consent page (POWERON_CLICKUP_AUTH_URL, default https://app.clickup.com/api).
        clickup_client_id, clickup_client_secret: The ClickUp OAuth app of this installation
            (POWERON_CLICKUP_CLIENT_ID / _SECRET); None: ClickUp connects by personal token only.
        jira_client_id, jira_client_secret: The Atlassian OAuth 2.0 (3LO) app (POWERON_JIRA_CLIENT_ID /
            _SECRET); None: Jira connects by API token or personal access token only.
        atlassian_auth_url: Atlassian's identity service (POWERON_ATLASSIAN_AUTH_URL, default
            https://auth.atlassian.com).
        atlassian_api_url: Atlassian's API gateway for OAuth apps (POWERON_ATLASSIAN_API_URL, default
            https://api.atlassian.com): accessible resources, /me and /ex/jira/{cloudId}/….
        connector_timeout_seconds: Longest wait for one ClickUp or Jira request
            (POWERON_CONNECTOR_TIMEOUT_SECONDS).
        connector_max_wait_seconds: Longest total wait for one request that ClickUp or Jira rate-limits
            (429) before it fails naming the limit (POWERON_CONNECTOR_MAX_WAIT_SECONDS).
        agent_approval_hours: How long an agent's request for approval of a tool call waits in the
            Inbox before it expires and the agent is told (POWERON_AGENT_APPROVAL_HOURS, default 72).
        role: What this process does (POWERON_ROLE): `all` (API, UI, scheduler, timers and run
            execution; the default and the only role SQLite allows), `api` (accepts and enqueues,
            executes nothing) or `worker` (executes runs from the shared queue, serves nothing).
        worker_heartbeat_seconds: How often a worker process tells the database it is alive
            (POWERON_WORKER_HEARTBEAT_SECONDS).
        worker_timeout_seconds: A worker silent for this long is taken for dead: another worker
            takes over its runs, continuing from their persisted frontier
            (POWERON_WORKER_TIMEOUT_SECONDS).
        mcp_run_wait_seconds: How long a tool call of an exposed workflow at /mcp waits for its
            run to finish before answering with the run id and status (POWERON_MCP_RUN_WAIT_SECONDS).
        mcp_timeout_seconds: Longest wait for one exchange with an external MCP server (connect,
            list tools, call a tool; POWERON_MCP_TIMEOUT_SECONDS); a slower server gives an error
            naming it.
        mcp_max_response_bytes: Most bytes read of one answer of an external MCP server
            (POWERON_MCP_MAX_RESPONSE_BYTES); reading stops there and the call says it was cut.
        vapid_private_key: The Web Push (VAPID) private key (POWERON_VAPID_PRIVATE_KEY: base64url
            of the raw 32-byte P-256 key, or its DER or PEM form); None: generated once per
            installation and kept sealed in the database (backend/notifications/push.py).
        vapid_subject: Who runs this server, told to push services in every push (POWERON_VAPID_SUBJECT,
            ``mailto:…`` or ``https://…``); None: POWERON_UI_URL when https, else a mailto: of POWERON_SMTP_FROM.
        push_http_hosts: Hosts a push subscription may name with plain http (POWERON_PUSH_HTTP_HOSTS,
            comma-separated, e.g. ``127.0.0.1`` for a test push service); every other endpoint must be https.
        push_timeout_seconds: Longest wait for one push service request (POWERON_PUSH_TIMEOUT_SECONDS).
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
    api_url: str = "http://localhost:3000"
    openai_api_key: str | None = None
    openai_base_url: str | None = None
    ai_model: str | None = None
    ai_image_model: str | None = None
    ai_speech_model: str | None = None
    ai_transcription_model: str | None = None
    ai_timeout_seconds: float = 60.0
    ai_providers: tuple[AiProviderSettings, ...] = ()
    ai_neutralize: bool = False
    neutralize_names: tuple[str, ...] = ()
    search_engine: str = "auto"
    search_url: str | None = None
    search_api_key: str | None = field(default=None, repr=False)
    search_proxy: str | None = None
    search_ca_file: str | None = None
    search_backends: str = "auto"
    readurl_allow_private: bool = False
    file_max_bytes: int = 20 * 1024 * 1024
    instance_quota_bytes: int = 1024 * 1024 * 1024
    timer_interval_seconds: float = 5.0
    mail_max_messages: int = 100
    run_threads: int = 4
    run_wait_seconds: float = 10.0
    scheduler_enabled: bool = True
    scheduler_lease_seconds: float = 15.0
    scheduler_startup_delay_seconds: float = 5.0
    scheduler_misfire_grace_seconds: float = 60.0
    smtp_url: str | None = field(default=None, repr=False)
    smtp_from: str | None = None
    task_link_hours: float = 72.0
    task_reminder_minutes: float = 60.0
    max_queued_runs: int = 1000
    webhook_max_bytes: int = 1024 * 1024
    msft_tenant: str | None = None
    msft_client_id: str | None = None
    msft_client_secret: str | None = field(default=None, repr=False)
    msft_authority: str = "https://login.microsoftonline.com"
    msft_graph_url: str = "https://graph.microsoft.com"
    graph_timeout_seconds: float = 30.0
    graph_max_pages: int = 20
    graph_max_retries: int = 4
    graph_max_wait_seconds: float = 60.0
    clickup_api_url: str = "https://api.clickup.com/api/v2"
    clickup_auth_url: str = "https://app.clickup.com/api"
    clickup_client_id: str | None = None
    clickup_client_secret: str | None = field(default=None, repr=False)
    jira_client_id: str | None = None
    jira_client_secret: str | None = field(default=None, repr=False)
    atlassian_auth_url: str = "https://auth.atlassian.com"
    atlassian_api_url: str = "https://api.atlassian.com"
    connector_timeout_seconds: float = 30.0
    connector_max_wait_seconds: float = 60.0
    agent_approval_hours: float = 72.0
    role: str = "all"
    worker_heartbeat_seconds: float = 5.0
    worker_timeout_seconds: float = 30.0
    # --- MCP (issue 19): the server at /mcp, external servers ---
    mcp_run_wait_seconds: float = 60.0
    mcp_timeout_seconds: float = 30.0
    mcp_max_response_bytes: int = 1_000_000
    # --- Web Push (issue 23) ---
    vapid_private_key: str | None = field(default=None, repr=False)
    vapid_subject: str | None = None
    push_http_hosts: tuple[str, ...] = ()
    push_timeout_seconds: float = 10.0

    @property
    def shared_queue(self) -> bool:
        """True on PostgreSQL: runs go through the shared run queue any worker process takes them from."""
        return self.db_url.startswith("postgresql")

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


def _count(name: str, default: int) -> int:
    """A whole number of at least 1."""
    raw = _text(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name} must be a whole number, not {raw!r}") from None
    if value < 1:
        raise ValueError(f"{name} must be at least 1, not {raw!r}")
    return value


def _seconds(name: str, default: float, zero_ok: bool = False) -> float:
    """A positive (or with `zero_ok` non-negative), finite number of seconds (fractions allowed)."""
    raw = _text(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name} must be a number of seconds, not {raw!r}") from None
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero_ok):
        raise ValueError(f"{name} must be a {'non-negative' if zero_ok else 'positive'} number of seconds, "
                         f"not {raw!r}")
    return value


SEARCH_ENGINES = ("auto", "ddgs", "searxng", "brave", "tavily")


def _search_engine() -> str:
    """POWERON_SEARCH_ENGINE: one of :data:`SEARCH_ENGINES` (any case), default ``auto``."""
    raw = _text("POWERON_SEARCH_ENGINE")
    if raw is None:
        return "auto"
    if raw.lower() not in SEARCH_ENGINES:
        raise ValueError(f"POWERON_SEARCH_ENGINE must be one of {', '.join(SEARCH_ENGINES)}, not {raw!r}")
    return raw.lower()


ROLES = ("all", "api", "worker")


def _role(db_url: str) -> str:
    """POWERON_ROLE: all (default), api or worker; the last two need the shared queue of PostgreSQL."""
    role = (_text("POWERON_ROLE") or "all").lower()
    if role not in ROLES:
        raise ValueError(f"POWERON_ROLE must be one of {', '.join(ROLES)}, not {role!r}")
    if role != "all" and not db_url.startswith("postgresql"):
        raise ValueError(f"POWERON_ROLE={role} needs PostgreSQL (POWERON_DB_URL=postgresql+psycopg://…): "
                         "with SQLite one process does everything (POWERON_ROLE=all)")
    return role


def _url(name: str, default: str) -> str:
    """An http(s) base URL without a trailing slash."""
    value = _text(name, rstrip="/") or default
    if not value.startswith(("http://", "https://")):
        raise ValueError(f"{name} must start with http:// or https://, not {value!r}")
    return value


_PROVIDER_FIELDS = ("name", "baseUrl", "apiKey", "apiKeyEnv", "model", "imageModel", "speechModel",
                    "transcriptionModel", "timeoutSeconds", "models", "prices")


def _ai_providers(name: str, default_timeout: float) -> tuple[AiProviderSettings, ...] | None:
    """POWERON_AI_PROVIDERS parsed and checked, or None when it is unset or blank.

    The value is a JSON list of objects, in failover order (README, "Configuration"). A bad
    value raises ValueError naming the variable, the item's index and the field; the value
    of a key is never repeated in the message.
    """
    raw = _text(name)
    if raw is None:
        return None
    try:
        items = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{name} is not valid JSON ({exc.msg} at character {exc.pos})") from None
    if not isinstance(items, list) or not items:
        raise ValueError(f"{name} must be a non-empty JSON list of provider objects")
    providers: list[AiProviderSettings] = []
    for index, item in enumerate(items):
        where = f"{name}[{index}]"
        if not isinstance(item, dict):
            raise ValueError(f"{where} must be an object with name, baseUrl, apiKey and model")
        unknown = sorted(set(item) - set(_PROVIDER_FIELDS))
        if unknown:
            raise ValueError(f"{where}: unknown field {unknown[0]!r} (known: {', '.join(_PROVIDER_FIELDS)})")

        def text(key: str, required: bool = False, secret: bool = False, item=item, where=where) -> str | None:
            return _item_text(item, where, key, required, secret)

        provider_name = text("name", required=True)
        if any(p.name == provider_name for p in providers):
            raise ValueError(f"{where}.name {provider_name!r} is used twice (names must be unique)")
        base_url = text("baseUrl")
        if base_url is not None and not base_url.startswith(("http://", "https://")):
            raise ValueError(f"{where}.baseUrl must start with http:// or https://, not {base_url!r}")
        api_key = text("apiKey", secret=True)
        key_env = text("apiKeyEnv")
        if (api_key is None) == (key_env is None):
            raise ValueError(f"{where}: give exactly one of apiKey and apiKeyEnv (the name of a variable "
                             "holding the key)")
        if key_env is not None:
            api_key = _text(key_env)
            if api_key is None:
                raise ValueError(f"{where}.apiKeyEnv names {key_env}, which is not set")
        timeout = item.get("timeoutSeconds", default_timeout)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not math.isfinite(timeout) \
                or timeout <= 0:
            raise ValueError(f"{where}.timeoutSeconds must be a positive number, not {timeout!r}")
        providers.append(AiProviderSettings(
            name=provider_name, base_url=base_url.rstrip("/") if base_url else None, api_key=api_key,
            model=text("model"), image_model=text("imageModel"), speech_model=text("speechModel"),
            transcription_model=text("transcriptionModel"), timeout_seconds=float(timeout),
            models=_model_aliases(item.get("models"), f"{where}.models"),
            prices=_prices(item.get("prices"), f"{where}.prices"), source=where,
        ))
    return tuple(providers)


def _item_text(item: dict[str, Any], where: str, key: str, required: bool, secret: bool) -> str | None:
    """A text field of a provider object; a secret's value is never shown in the message."""
    value = item.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        shown = "" if secret or value is None else f", not {value!r}"
        raise ValueError(f"{where}.{key} must be a non-empty string{shown}")
    return value.strip()


def _model_aliases(value: Any, where: str) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) and k and v
                                              for k, v in value.items()):
        raise ValueError(f"{where} must be an object of model names: {{\"requested\": \"this provider's model\"}}")
    return tuple(value.items())


def _prices(value: Any, where: str) -> tuple[tuple[str, float, float], ...]:
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise ValueError(f"{where} must be an object: {{\"model\": {{\"input\": CHF, \"output\": CHF}}}} "
                         "(CHF per million tokens)")
    prices = []
    for model, price in value.items():
        if not isinstance(price, dict) or set(price) != {"input", "output"}:
            raise ValueError(f"{where}.{model} must be {{\"input\": CHF, \"output\": CHF}} (per million tokens)")
        for side in ("input", "output"):
            amount = price[side]
            if isinstance(amount, bool) or not isinstance(amount, int | float) or not math.isfinite(amount) \
                    or amount < 0:
                raise ValueError(f"{where}.{model}.{side} must be a number of CHF >= 0, not {amount!r}")
        prices.append((model, float(price["input"]), float(price["output"])))
    return tuple(prices)


def _default_ai_provider(timeout: float) -> tuple[AiProviderSettings, ...]:
    """The one provider of OPENAI_API_KEY / OPENAI_BASE_URL / POWERON_AI_MODEL, if a key is set."""
    key = _text("OPENAI_API_KEY")
    if key is None:
        return ()
    return (AiProviderSettings(
        name="default", base_url=_text("OPENAI_BASE_URL", rstrip="/"), api_key=key, model=_text("POWERON_AI_MODEL"),
        image_model=_text("POWERON_AI_IMAGE_MODEL"), speech_model=_text("POWERON_AI_SPEECH_MODEL"),
        transcription_model=_text("POWERON_AI_TRANSCRIPTION_MODEL"), timeout_seconds=timeout,
    ),)


@functools.cache
def get_settings() -> Settings:
    """Read the configuration once per process."""
    load_dotenv(PROJECT_ROOT / ".env", override=False)
    data_dir = _data_dir()
    default_db = f"sqlite:///{data_dir / 'poweron.db'}"
    ai_timeout = float(os.environ.get("POWERON_AI_TIMEOUT_SECONDS") or "60")
    ai_providers = _ai_providers("POWERON_AI_PROVIDERS", ai_timeout)
    db_url = _normalise_db_url(os.environ.get("POWERON_DB_URL") or default_db)
    return Settings(
        db_url=db_url,
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
        api_url=_text("POWERON_API_URL", rstrip="/") or "http://localhost:3000",
        openai_api_key=_text("OPENAI_API_KEY"),
        openai_base_url=_text("OPENAI_BASE_URL", rstrip="/"),
        ai_model=_text("POWERON_AI_MODEL"),
        ai_image_model=_text("POWERON_AI_IMAGE_MODEL"),
        ai_speech_model=_text("POWERON_AI_SPEECH_MODEL"),
        ai_transcription_model=_text("POWERON_AI_TRANSCRIPTION_MODEL"),
        ai_timeout_seconds=ai_timeout,
        ai_providers=ai_providers if ai_providers is not None else _default_ai_provider(ai_timeout),
        ai_neutralize=_flag(os.environ.get("POWERON_AI_NEUTRALIZE")),
        neutralize_names=_csv(os.environ.get("POWERON_NEUTRALIZE_NAMES"), default=()),
        search_engine=_search_engine(),
        search_url=_text("POWERON_SEARCH_URL", rstrip="/"),
        search_api_key=_text("POWERON_SEARCH_API_KEY"),
        search_proxy=_text("POWERON_SEARCH_PROXY"),
        search_ca_file=_text("POWERON_SEARCH_CA_FILE") or _text("SSL_CERT_FILE"),
        search_backends=(_text("POWERON_SEARCH_BACKENDS") or "auto").replace(" ", ""),
        readurl_allow_private=_flag(os.environ.get("POWERON_READURL_ALLOW_PRIVATE")),
        file_max_bytes=_bytes("POWERON_FILE_MAX_BYTES", 20 * 1024 * 1024),
        instance_quota_bytes=_bytes("POWERON_INSTANCE_QUOTA_BYTES", 1024 * 1024 * 1024),
        timer_interval_seconds=_seconds("POWERON_TIMER_INTERVAL_SECONDS", 5.0),
        mail_max_messages=_count("POWERON_MAIL_MAX_MESSAGES", 100),
        run_threads=_count("POWERON_RUN_THREADS", 4),
        run_wait_seconds=_seconds("POWERON_RUN_WAIT_SECONDS", 10.0),
        scheduler_enabled=_flag(os.environ.get("POWERON_SCHEDULER") or "on"),
        scheduler_lease_seconds=_seconds("POWERON_SCHEDULER_LEASE_SECONDS", 15.0),
        scheduler_startup_delay_seconds=_seconds("POWERON_SCHEDULER_STARTUP_DELAY_SECONDS", 5.0, zero_ok=True),
        scheduler_misfire_grace_seconds=_seconds("POWERON_SCHEDULER_MISFIRE_GRACE_SECONDS", 60.0),
        smtp_url=_text("POWERON_SMTP_URL"),
        smtp_from=_text("POWERON_SMTP_FROM"),
        task_link_hours=_seconds("POWERON_TASK_LINK_HOURS", 72.0),
        task_reminder_minutes=_seconds("POWERON_TASK_REMINDER_MINUTES", 60.0, zero_ok=True),
        max_queued_runs=_count("POWERON_MAX_QUEUED_RUNS", 1000),
        webhook_max_bytes=_bytes("POWERON_WEBHOOK_MAX_BYTES", 1024 * 1024),
        msft_tenant=_text("POWERON_MSFT_TENANT"),
        msft_client_id=_text("POWERON_MSFT_CLIENT_ID"),
        msft_client_secret=os.environ.get("POWERON_MSFT_CLIENT_SECRET") or None,
        msft_authority=_url("POWERON_MSFT_AUTHORITY", "https://login.microsoftonline.com"),
        msft_graph_url=_url("POWERON_MSFT_GRAPH_URL", "https://graph.microsoft.com"),
        graph_timeout_seconds=_seconds("POWERON_GRAPH_TIMEOUT_SECONDS", 30.0),
        graph_max_pages=_count("POWERON_GRAPH_MAX_PAGES", 20),
        graph_max_retries=_count("POWERON_GRAPH_MAX_RETRIES", 4),
        graph_max_wait_seconds=_seconds("POWERON_GRAPH_MAX_WAIT_SECONDS", 60.0, zero_ok=True),
        clickup_api_url=_url("POWERON_CLICKUP_API_URL", "https://api.clickup.com/api/v2"),
        clickup_auth_url=_url("POWERON_CLICKUP_AUTH_URL", "https://app.clickup.com/api"),
        clickup_client_id=_text("POWERON_CLICKUP_CLIENT_ID"),
        clickup_client_secret=os.environ.get("POWERON_CLICKUP_CLIENT_SECRET") or None,
        jira_client_id=_text("POWERON_JIRA_CLIENT_ID"),
        jira_client_secret=os.environ.get("POWERON_JIRA_CLIENT_SECRET") or None,
        atlassian_auth_url=_url("POWERON_ATLASSIAN_AUTH_URL", "https://auth.atlassian.com"),
        atlassian_api_url=_url("POWERON_ATLASSIAN_API_URL", "https://api.atlassian.com"),
        connector_timeout_seconds=_seconds("POWERON_CONNECTOR_TIMEOUT_SECONDS", 30.0),
        connector_max_wait_seconds=_seconds("POWERON_CONNECTOR_MAX_WAIT_SECONDS", 60.0, zero_ok=True),
        agent_approval_hours=_seconds("POWERON_AGENT_APPROVAL_HOURS", 72.0),
        role=_role(db_url),
        worker_heartbeat_seconds=_seconds("POWERON_WORKER_HEARTBEAT_SECONDS", 5.0),
        worker_timeout_seconds=_seconds("POWERON_WORKER_TIMEOUT_SECONDS", 30.0),
        # MCP (issue 19)
        mcp_run_wait_seconds=_seconds("POWERON_MCP_RUN_WAIT_SECONDS", 60.0, zero_ok=True),
        mcp_timeout_seconds=_seconds("POWERON_MCP_TIMEOUT_SECONDS", 30.0),
        mcp_max_response_bytes=_bytes("POWERON_MCP_MAX_RESPONSE_BYTES", 1_000_000),
        # Web Push (issue 23)
        vapid_private_key=_text("POWERON_VAPID_PRIVATE_KEY"),
        vapid_subject=_text("POWERON_VAPID_SUBJECT"),
        push_http_hosts=tuple(h.lower() for h in _csv(os.environ.get("POWERON_PUSH_HTTP_HOSTS"), default=())),
        push_timeout_seconds=_seconds("POWERON_PUSH_TIMEOUT_SECONDS", 10.0),
    )


def reset_settings_cache() -> None:
    """Forget the cached settings (tests that change the environment call this)."""
    get_settings.cache_clear()
