"""Jira (DESIGN §8: connection type `jira`): issues of Jira Cloud or Jira Data Center over their REST APIs.

A connection is made one of three ways:

- Jira Cloud with an API token: settings `{deployment: "cloud", siteUrl, email, apiToken}`; calls go
  to `{siteUrl}/rest/api/3` signed with HTTP Basic `email:apiToken`.
- Jira Data Center with a personal access token: `{deployment: "datacenter", siteUrl, apiToken}`;
  calls go to `{siteUrl}/rest/api/2` with `Authorization: Bearer <token>`.
- Jira Cloud by consent (Atlassian OAuth 2.0 (3LO), :data:`PROVIDER`): the consent at
  `{POWERON_ATLASSIAN_AUTH_URL}/authorize` (audience api.atlassian.com, prompt=consent); the
  account is read from `{POWERON_ATLASSIAN_API_URL}/oauth/token/accessible-resources` (the first
  site granting Jira scopes: its cloud id and URL) and `/me`; calls go through Atlassian's gateway,
  `{POWERON_ATLASSIAN_API_URL}/ex/jira/{cloudId}/rest/api/3`, with the connection's access token
  (refreshed by OAuthTokens; Atlassian rotates refresh tokens, each new one is stored at once).

:class:`JiraClient` is the small client every action uses (on backend.connectors.rest.RestClient:
429 waits for Retry-After; errors carry Jira's own `errorMessages` / `errors` text, e.g. "Error in
the JQL Query: …"). Searching pages by `nextPageToken` on Cloud (`POST /rest/api/3/search/jql`) and by
`startAt` / `total` on Data Center (`POST /rest/api/2/search`).

Webhooks (:data:`WEBHOOKS`): registered with `POST /rest/webhooks/1.0/webhook` (the events, a JQL
filter, and a secret); Jira signs each delivery with `X-Hub-Signature: sha256=<HMAC-SHA256 of the
body>`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Literal
from urllib.parse import quote, urlsplit

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.alias_generators import to_camel
from pydantic_core import InitErrorDetails, PydanticCustomError

from backend.config import get_settings
from backend.connectors.oauth import Identity, OAuthClientConfig, OAuthProvider, OAuthTokens, redirect_uri
from backend.connectors.rest import ApiError, RestClient
from backend.connectors.types import (
    ConnectionFailed,
    ConnectionType,
    Credentials,
    RemoteHook,
    WebhookSupport,
    register_connection_type,
)

TYPE_ID = "jira"
LABEL = "Jira"
SERVICE = "Jira"
CLOUD, DATACENTER = "cloud", "datacenter"
SCOPES = ("read:jira-work", "write:jira-work", "read:jira-user", "manage:jira-webhook", "read:me", "offline_access")
AUDIENCE = "api.atlassian.com"
REQUIRED_SETTINGS = ("POWERON_JIRA_CLIENT_ID", "POWERON_JIRA_CLIENT_SECRET")
PAGE_SIZE = 100
PROJECT_PAGE = 50
EVENTS = ("jira:issue_created", "jira:issue_updated", "jira:issue_deleted", "comment_created")
SIGNATURE_HEADER = "x-hub-signature"
WEBHOOKS_PATH = "/rest/webhooks/1.0/webhook"


# --- settings -----------------------------------------------------------------------------------------


class JiraSettings(BaseModel):
    """What a user types to connect Jira with a token (camelCase in the API)."""

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)

    deployment: Literal["cloud", "datacenter"] = Field(
        CLOUD, title="Deployment", json_schema_extra={"x-labels": ["Jira Cloud", "Jira Data Center"]},
        description="Jira Cloud (…atlassian.net, e-mail + API token) or Jira Data Center "
                                               "(your own server, personal access token)")
    site_url: str = Field(..., min_length=8, max_length=500, title="Site URL",
                          description="e.g. https://your-team.atlassian.net or https://jira.example.com")
    email: str | None = Field(None, max_length=320, title="E-mail",
                              description="Your Atlassian account's e-mail address (Jira Cloud only)")
    api_token: str = Field(..., min_length=1, max_length=2000, title="API token",
                           description="Jira Cloud: an API token (id.atlassian.com → Security → API tokens); "
                                       "Data Center: a personal access token (Profile → Personal Access Tokens)")

    @field_validator("site_url")
    @classmethod
    def _site(cls, value: str) -> str:
        value = value.strip().rstrip("/")
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
            raise ValueError("must be the address of the Jira site, e.g. https://your-team.atlassian.net")
        if re.search(r"/rest(/|$)", parts.path):
            raise ValueError("give the site's address without /rest/…, e.g. https://your-team.atlassian.net")
        return value

    @model_validator(mode="after")
    def _what_the_deployment_needs(self) -> JiraSettings:
        """Jira Cloud signs in with an e-mail address; Data Center's token needs none."""
        if self.deployment == CLOUD:
            email = (self.email or "").strip()
            if not re.fullmatch(r"[^@\s]+@[^@\s]+", email):
                _invalid("email", "the e-mail address of your Atlassian account is required for Jira Cloud")
            self.email = email
        else:
            self.email = None
        return self


def _invalid(field: str, message: str) -> None:
    raise ValidationError.from_exception_data("JiraSettings", [InitErrorDetails(
        type=PydanticCustomError("value_error", message), loc=(field,), input=None)])


def is_oauth(credentials: Credentials) -> bool:
    """Whether the connection was made by consent at Atlassian (else with a token)."""
    return credentials.settings.get("auth") == "oauth"


def is_cloud(credentials: Credentials) -> bool:
    return is_oauth(credentials) or credentials.settings.get("deployment", CLOUD) == CLOUD


# --- the Atlassian consent ------------------------------------------------------------------------------


def oauth_unavailable() -> str | None:
    """None when Jira can be connected by consent here, else which settings are missing."""
    settings = get_settings()
    values = (settings.jira_client_id, settings.jira_client_secret)
    missing = [name for name, value in zip(REQUIRED_SETTINGS, values, strict=True) if not value]
    if not missing:
        return None
    return (f"signing in to Jira with Atlassian is not set up on this server: set {', '.join(missing)} (an OAuth "
            f"2.0 (3LO) app in Atlassian's developer console whose callback URL is {redirect_uri(TYPE_ID)}); "
            "a Jira connection with an API token works without it")


def client_config() -> OAuthClientConfig:
    """Atlassian's identity service and this installation's OAuth 2.0 (3LO) app."""
    settings = get_settings()
    return OAuthClientConfig(settings.atlassian_auth_url + "/authorize", settings.atlassian_auth_url + "/oauth/token",
                             settings.jira_client_id or "", settings.jira_client_secret or "")


def _gateway(access_token: str) -> RestClient:
    return RestClient("Atlassian", get_settings().atlassian_api_url,
                      {"Authorization": f"Bearer {access_token}"}, error_text=error_text)


def _jira_site(resources: Any) -> dict[str, Any]:
    """The first site of accessible-resources whose scopes are Jira's."""
    sites = [r for r in resources if isinstance(r, dict)] if isinstance(resources, list) else []
    found = next((r for r in sites if r.get("id") and any("jira" in str(s) for s in r.get("scopes") or [])), None)
    if found is None:
        raise ConnectionFailed("the consent gave access to no Jira site: connect again and choose a Jira site on "
                               "Atlassian's consent page")
    return found


def identify(access_token: str) -> Identity:
    """The Jira site (cloud id, URL) and the Atlassian account a fresh access token is for."""
    with _gateway(access_token) as gateway:
        site = _jira_site(gateway.json("GET", "/oauth/token/accessible-resources", "listing the accessible sites"))
        me = gateway.json("GET", "/me", "reading the signed-in account") or {}
    account_id = str(me.get("account_id") or "")
    if not account_id:
        raise ConnectionFailed("Atlassian did not say which account signed in")
    account = str(me.get("email") or me.get("name") or account_id)
    cloud_id = str(site["id"])
    return Identity(subject=f"{cloud_id}/{account_id}", account=account, settings={
        "auth": "oauth", "deployment": CLOUD, "cloudId": cloud_id, "siteUrl": str(site.get("url") or "").rstrip("/"),
        "siteName": str(site.get("name") or ""), "account": account,
        "displayName": str(me.get("name") or account), "accountId": f"{cloud_id}/{account_id}"})


PROVIDER = OAuthProvider(name="Atlassian", scopes=SCOPES, client=client_config, identify=identify,
                         authorize_params=(("audience", AUDIENCE), ("prompt", "consent")),
                         unavailable=oauth_unavailable)


# --- errors -------------------------------------------------------------------------------------------


def error_text(response: httpx.Response) -> str:
    """Jira's words for a failed call: `errorMessages` and `errors` {field: message}; the gateway's
    `message`; else the body's text."""
    try:
        body = response.json()
    except ValueError:
        text = response.text.strip()
        return "" if text.lstrip().startswith("<") else text
    if not isinstance(body, dict):
        return ""
    said = [str(m) for m in body.get("errorMessages") or [] if m]
    errors = body.get("errors")
    if isinstance(errors, dict):
        said += [f"{field}: {message}" for field, message in errors.items()]
    for key in ("message", "error_description", "error"):
        if not said and isinstance(body.get(key), str):
            said.append(body[key])
    return "; ".join(said)


# --- the client ---------------------------------------------------------------------------------------


class JiraClient:
    """Jira's REST API for one connection (Cloud v3, Data Center v2, or Cloud through Atlassian's gateway).

    Args:
        credentials: The connection.
        mark_expired: For a consent: make the connection `expired` when Atlassian no longer renews
            it (the live test of the Connections page passes False).
    """

    def __init__(self, credentials: Credentials, mark_expired: bool = True):
        self.credentials = credentials
        settings = credentials.settings
        self.cloud = is_cloud(credentials)
        self.version = "3" if self.cloud else "2"
        self.site_url = str(settings.get("siteUrl") or "").rstrip("/")
        if is_oauth(credentials):
            cloud_id = quote(str(settings.get("cloudId") or ""), safe="")
            root = f"{get_settings().atlassian_api_url}/ex/jira/{cloud_id}"
            self._tokens = OAuthTokens(credentials, PROVIDER, mark_expired=mark_expired)
            self._last: str | None = None
            auth: Mapping[str, str] | Callable[[bool], Mapping[str, str]] = self._bearer
        else:
            root = self.site_url
            auth = _token_auth(credentials)
        self.rest = RestClient(SERVICE, root, auth, error_text=error_text)

    def _bearer(self, renew: bool) -> Mapping[str, str]:
        token = self._tokens.renew(self._last or "") if renew else self._tokens.access_token()
        self._last = token
        return {"Authorization": f"Bearer {token}"}

    def close(self) -> None:
        self.rest.close()

    def __enter__(self) -> JiraClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def api(self, path: str) -> str:
        """`/rest/api/{3|2}{path}`."""
        return f"/rest/api/{self.version}{path}"

    def call(self, method: str, path: str, what: str, **kwargs: Any) -> Any:
        return self.rest.json(method, self.api(path), what, **kwargs)

    def browse_url(self, key: str) -> str:
        return f"{self.site_url}/browse/{key}"

    # --- account and projects -------------------------------------------------------------------

    def myself(self) -> dict[str, Any]:
        return self.call("GET", "/myself", "reading the signed-in account") or {}

    def projects(self) -> list[dict[str, Any]]:
        """Every project the account can browse (Cloud: `project/search`, paged; Data Center: `project`)."""
        if not self.cloud:
            found = self.call("GET", "/project", "listing the projects")
            return [p for p in found or [] if isinstance(p, dict)]
        projects: list[dict[str, Any]] = []
        start = 0
        while True:
            page = self.call("GET", "/project/search", "listing the projects",
                             params={"startAt": start, "maxResults": PROJECT_PAGE}) or {}
            values = [p for p in page.get("values") or [] if isinstance(p, dict)]
            projects += values
            start += len(values)
            if page.get("isLast", True) or not values:
                return projects

    def project(self, key: str) -> dict[str, Any]:
        """One project with its issue types; a clear error when there is none of that key."""
        try:
            return self.call("GET", f"/project/{quote(key, safe='')}", f"reading project {key}") or {}
        except ApiError as exc:
            if exc.not_found:
                raise ConnectionFailed(f"there is no Jira project '{key}' (or this account may not see it): "
                                       "jira.connect lists the projects") from None
            raise

    def priorities(self) -> list[dict[str, Any]]:
        return [p for p in self.call("GET", "/priority", "listing the priorities") or [] if isinstance(p, dict)]

    def fields(self) -> list[dict[str, Any]]:
        """Every field (id, name, custom) of the site."""
        return [f for f in self.call("GET", "/field", "listing the fields") or [] if isinstance(f, dict)]

    def find_user(self, text: str) -> dict[str, Any] | None:
        """The user an account id (Cloud), username (Data Center) or e-mail address names, else None."""
        if self.cloud and not ("@" in text or " " in text):
            try:
                return self.call("GET", "/user", f"reading user {text}", params={"accountId": text})
            except ApiError as exc:
                if exc.status not in (400, 404):
                    raise
        params = {"query": text} if self.cloud else {"username": text}
        found = self.call("GET", "/user/search", f"looking up user {text}", params=params) or []
        lowered = text.lower()
        exact = [u for u in found if isinstance(u, dict) and lowered in
                 {str(u.get(k) or "").lower() for k in ("accountId", "name", "key", "emailAddress", "displayName")}]
        return exact[0] if exact else None

    def user_ref(self, user: Mapping[str, Any]) -> dict[str, Any]:
        """How an issue field names a user: `{accountId}` on Cloud, `{name}` on Data Center."""
        return {"accountId": user["accountId"]} if self.cloud else {"name": user.get("name") or user.get("key")}

    # --- searching ------------------------------------------------------------------------------

    def search(self, jql: str, fields: list[str], max_results: int, page_token: str | None = None
               ) -> tuple[list[dict[str, Any]], str | None, int | None]:
        """One page of issues: (issues, the next page's token or None, the total on Data Center).

        Cloud pages by `nextPageToken`; Data Center by `startAt` (its token is that number as text).
        """
        if self.cloud:
            body: dict[str, Any] = {"jql": jql, "fields": fields, "maxResults": max_results}
            if page_token:
                body["nextPageToken"] = page_token
            page = self.call("POST", "/search/jql", "searching issues", json=body) or {}
            issues = [i for i in page.get("issues") or [] if isinstance(i, dict)]
            token = page.get("nextPageToken")
            return issues, (str(token) if token and not page.get("isLast", False) else None), None
        start = _start_at(page_token)
        page = self.call("POST", "/search", "searching issues",
                         json={"jql": jql, "fields": fields, "maxResults": max_results, "startAt": start}) or {}
        issues = [i for i in page.get("issues") or [] if isinstance(i, dict)]
        total = int(page.get("total") or 0)
        following = start + len(issues)
        return issues, (str(following) if issues and following < total else None), total

    def search_all(self, jql: str, fields: list[str], cap: int) -> Iterator[dict[str, Any]]:
        """Every issue of `jql`, page after page, at most `cap`."""
        token: str | None = None
        given = 0
        while given < cap:
            issues, token, _total = self.search(jql, fields, min(PAGE_SIZE, cap - given), token)
            for issue in issues[:cap - given]:
                given += 1
                yield issue
            if token is None or not issues:
                return

    # --- issues ---------------------------------------------------------------------------------

    def issue(self, key: str, fields: list[str] | None = None) -> dict[str, Any]:
        params = {"fields": ",".join(fields)} if fields else None
        try:
            return self.call("GET", f"/issue/{quote(key, safe='')}", f"reading issue {key}", params=params) or {}
        except ApiError as exc:
            if exc.not_found:
                raise ConnectionFailed(f"there is no Jira issue {key} (or this account may not see it)") from None
            raise

    def create_issue(self, fields: dict[str, Any]) -> dict[str, Any]:
        return self.call("POST", "/issue", "creating an issue", json={"fields": fields}) or {}

    def edit_issue(self, key: str, fields: dict[str, Any] | None = None, update: dict[str, Any] | None = None
                   ) -> None:
        body: dict[str, Any] = {}
        if fields:
            body["fields"] = fields
        if update:
            body["update"] = update
        try:
            self.call("PUT", f"/issue/{quote(key, safe='')}", f"updating issue {key}", json=body)
        except ApiError as exc:
            if exc.not_found:
                raise ConnectionFailed(f"there is no Jira issue {key} (or this account may not see it)") from None
            raise

    def transitions(self, key: str) -> list[dict[str, Any]]:
        found = self.call("GET", f"/issue/{quote(key, safe='')}/transitions", f"listing the transitions of {key}")
        return [t for t in (found or {}).get("transitions") or [] if isinstance(t, dict)]

    def transition(self, key: str, transition_id: str) -> None:
        self.call("POST", f"/issue/{quote(key, safe='')}/transitions", f"moving issue {key}",
                  json={"transition": {"id": transition_id}})

    def add_comment(self, key: str, text: str) -> dict[str, Any]:
        return self.call("POST", f"/issue/{quote(key, safe='')}/comment", f"commenting on issue {key}",
                         json={"body": self.rich(text)}) or {}

    def rich(self, text: str) -> Any:
        """Text as this API takes it: Atlassian Document Format on Cloud, plain text on Data Center."""
        return to_adf(text) if self.cloud else text

    # --- webhooks -------------------------------------------------------------------------------

    def register_webhook(self, name: str, url: str, events: tuple[str, ...], jql: str | None, secret: str
                         ) -> dict[str, Any]:
        body: dict[str, Any] = {"name": name, "url": url, "events": list(events), "excludeBody": False,
                                "secret": secret}
        if jql:
            body["filters"] = {"issue-related-events-section": jql}
        return self.rest.json("POST", WEBHOOKS_PATH, "registering a webhook", json=body) or {}

    def delete_webhook(self, webhook_id: str) -> None:
        try:
            self.rest.request("DELETE", f"{WEBHOOKS_PATH}/{quote(webhook_id, safe='')}", "removing a webhook")
        except ApiError as exc:
            if not exc.not_found:
                raise


def _token_auth(credentials: Credentials) -> Mapping[str, str]:
    token = str(credentials.secret.get("apiToken") or "")
    if is_cloud(credentials):
        pair = f"{credentials.settings.get('email') or ''}:{token}".encode()
        header = "Basic " + base64.b64encode(pair).decode()
    else:
        header = f"Bearer {token}"
    return {"Authorization": header}


def _start_at(token: str | None) -> int:
    if not token:
        return 0
    if not token.isdigit():
        raise ConnectionFailed(f"'{token}' is not a page of Jira Data Center's search (give startAt, a number)")
    return int(token)


# --- Atlassian Document Format ------------------------------------------------------------------------


def to_adf(text: str) -> dict[str, Any]:
    """Plain text as an ADF document: a paragraph per blank-line-separated block, line breaks kept."""
    paragraphs = []
    for block in re.split(r"\n\s*\n", (text or "").replace("\r\n", "\n").strip()):
        content: list[dict[str, Any]] = []
        for number, line in enumerate(block.split("\n")):
            if number:
                content.append({"type": "hardBreak"})
            if line:
                content.append({"type": "text", "text": line})
        if content:
            paragraphs.append({"type": "paragraph", "content": content})
    return {"type": "doc", "version": 1, "content": paragraphs}


def from_adf(value: Any) -> str:
    """The text of an ADF document (or a Data Center string as it is)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    blocks: list[str] = []
    _collect(value, blocks)
    return "\n\n".join(b for b in blocks if b is not None).strip()


BLOCKS = frozenset({"paragraph", "heading", "codeBlock", "blockquote", "listItem", "tableCell", "tableHeader", "panel"})


def _collect(node: Any, blocks: list[str]) -> None:
    if isinstance(node, list):
        for child in node:
            _collect(child, blocks)
        return
    if not isinstance(node, dict):
        return
    if node.get("type") in BLOCKS and not any(isinstance(c, dict) and c.get("type") in BLOCKS
                                                for c in node.get("content") or []):
        blocks.append(_inline(node))
        return
    _collect(node.get("content") or [], blocks)


def _inline(node: Any) -> str:
    if isinstance(node, list):
        return "".join(_inline(child) for child in node)
    if not isinstance(node, dict):
        return ""
    kind = node.get("type")
    if kind == "text":
        return str(node.get("text") or "")
    if kind == "hardBreak":
        return "\n"
    if kind in ("mention", "emoji", "status", "date", "inlineCard"):
        attrs = node.get("attrs") or {}
        return str(attrs.get("text") or attrs.get("shortName") or attrs.get("url") or "")
    return _inline(node.get("content") or [])


# --- the connection type ------------------------------------------------------------------------------


def check(credentials: Credentials) -> str:
    """Sign in (`GET /myself`) and count the projects."""
    with JiraClient(credentials, mark_expired=False) as client:
        me = client.myself()
        projects = client.projects()
    site = urlsplit(client.site_url).hostname or client.site_url
    name = me.get("displayName") or me.get("emailAddress") or me.get("name") or "?"
    count = len(projects)
    return f"signed in to {site} as {name}: {count} project{'' if count == 1 else 's'}"


def _renew_due(credentials: Credentials) -> None:
    """Refresh a consented connection's access token when it expires within five minutes."""
    if is_oauth(credentials):
        OAuthTokens(credentials, PROVIDER).access_token()


# --- webhooks -----------------------------------------------------------------------------------------


class JiraTriggerParams(BaseModel):
    """The Jira trigger node's parameters."""

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)

    connection_id: str = Field(max_length=32, description="Id of the Jira connection whose events start the "
                                                         "workflow (registering a webhook needs a Jira administrator)")
    events: list[Literal[EVENTS]] = Field(  # typing flattens the tuple: each one of EVENTS
        ["jira:issue_created"], min_length=1, max_length=len(EVENTS),
        description="Which events start it")
    jql: str | None = Field(None, max_length=2000, title="JQL filter",
                            description="Only issues matching this JQL, e.g. project = OPS AND labels = customer")


def register_webhook(credentials: Credentials, url: str, events: tuple[str, ...], params: dict[str, Any],
                     secret: str) -> RemoteHook:
    """Register a webhook at the connection's Jira that POSTs `events` (signed with `secret`) to `url`."""
    wanted = tuple(e for e in events if e in EVENTS)
    if not wanted:
        raise ConnectionFailed(f"name at least one Jira event ({', '.join(EVENTS)})")
    jql = str(params.get("jql") or "").strip() or None
    with JiraClient(credentials) as client:
        made = client.register_webhook(f"PowerOn: {credentials.label}"[:255], url, wanted, jql, secret)
    remote_id = str(made.get("self") or "").rstrip("/").rsplit("/", 1)[-1] or str(made.get("id") or "")
    if not remote_id:
        raise ConnectionFailed("Jira registered the webhook without saying its id")
    return RemoteHook(remote_id=remote_id, secret=secret)


def unregister_webhook(credentials: Credentials, remote_id: str) -> None:
    """Remove a registered webhook (one already gone is no error)."""
    with JiraClient(credentials) as client:
        client.delete_webhook(remote_id)


def signature(body: bytes, secret: str) -> str:
    """The `X-Hub-Signature` of a delivery: `sha256=<hex HMAC-SHA256 of the body>`."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify_delivery(headers: Any, body: bytes, secret: str) -> bool:
    """Whether a delivery carries the `X-Hub-Signature` of `secret` over its raw body."""
    given = headers.get(SIGNATURE_HEADER) if headers is not None else None
    if not isinstance(given, str) or not secret:
        return False
    return hmac.compare_digest(given.strip().lower().encode(), signature(body, secret).encode())


def event_of(body: Any) -> str | None:
    """A delivery's event (`webhookEvent`), or None for a body that is not a Jira event."""
    event = body.get("webhookEvent") if isinstance(body, dict) else None
    return event if isinstance(event, str) and event else None


def delivery_id(headers: Any, _body: Any) -> str | None:
    """Jira's id of a delivery (`X-Atlassian-Webhook-Identifier`), the same when it retries it."""
    value = headers.get("x-atlassian-webhook-identifier") if headers is not None else None
    return value.strip() if isinstance(value, str) and value.strip() else None


WEBHOOKS = WebhookSupport(events=EVENTS, params_model=JiraTriggerParams, register=register_webhook,
                          unregister=unregister_webhook, verify=verify_delivery, event_of=event_of,
                          delivery_id=delivery_id)

JIRA = register_connection_type(ConnectionType(
    id=TYPE_ID, label=LABEL,
    description="Issues of Jira Cloud (e-mail + API token, or signing in with Atlassian) or Jira Data Center "
                "(personal access token); the token is sealed and never shown again.",
    auth="password", check=check, settings_model=JiraSettings, secret_fields=("api_token",), oauth=PROVIDER,
    renew_due=_renew_due, webhooks=WEBHOOKS,
))
