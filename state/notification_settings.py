"""State of the notification settings panel on the Notifications page (issue 23, part 5) and of
"Enable push on this device".

Thin: the choices go through the door backend.notifications.preferences.NotificationSettings,
the browser's push subscription through backend.notifications.push.PushSubscriptions — both
touch only the signed-in user's own rows. Subscribing happens in the browser (service worker,
Notification permission, PushManager with the server's VAPID key: ENABLE_PUSH_JS); its outcome
comes back to :meth:`NotificationSettingsState.push_result`, which keeps the subscription.
"""

from __future__ import annotations

import json
from typing import Any, TypedDict

import reflex as rx

from backend.errors import DomainError
from backend.notifications import preferences
from backend.notifications.preferences import NotificationSettings
from backend.notifications.push import PushSubscriptions
from backend.rbac.access import AccessContext
from state.auth import AuthState, NotSignedIn
from state.page import PageMixin
from state.permissions import requires_door

# Runs in the page: resolves to {status, message?, subscription?, userAgent?}; never throws.
ENABLE_PUSH_JS = """
(async (key) => {
  try {
    if (!("serviceWorker" in navigator) || !("PushManager" in window) || !("Notification" in window)) {
      return {status: "unsupported"};
    }
    if (!window.isSecureContext) return {status: "insecure"};
    const permission = await Notification.requestPermission();
    if (permission !== "granted") return {status: permission === "denied" ? "denied" : "dismissed"};
    const registration = await navigator.serviceWorker.register("/sw.js", {scope: "/"});
    await navigator.serviceWorker.ready;
    const padded = (key + "=".repeat((4 - key.length % 4) % 4)).replace(/-/g, "+").replace(/_/g, "/");
    const applicationServerKey = Uint8Array.from(atob(padded), (c) => c.charCodeAt(0));
    let subscription = await registration.pushManager.getSubscription();
    if (subscription) {
      const current = subscription.options && subscription.options.applicationServerKey;
      const same = current && new Uint8Array(current).every((b, i) => b === applicationServerKey[i]);
      if (!same) { await subscription.unsubscribe(); subscription = null; }
    }
    if (!subscription) {
      subscription = await registration.pushManager.subscribe({userVisibleOnly: true, applicationServerKey});
    }
    return {status: "subscribed", subscription: subscription.toJSON(), userAgent: navigator.userAgent};
  } catch (error) {
    return {status: "error", message: String((error && error.message) || error)};
  }
})(__KEY__)
"""

PUSH_MESSAGES = {
    "unsupported": "This browser cannot receive push notifications (no service worker or Push API). On an iPhone, "
                   "add PowerOn to the home screen first (Share → Add to Home Screen) and enable push there.",
    "insecure": "Push needs a secure connection: open PowerOn over https (or on localhost).",
    "denied": "Notifications are blocked for this site. Allow them in the browser's site settings, then try again.",
    "dismissed": "Push was not enabled: the browser's permission question was closed without an answer.",
}


class SettingRow(TypedDict):
    event: str
    label: str
    app: bool
    mail: bool
    push: bool


class DeviceRow(TypedDict):
    id: str
    label: str
    error: str


def _device_label(user_agent: str) -> str:
    """A short name of the browser behind a subscription ("Chrome on Android")."""
    agent = user_agent or ""
    browser = next((name for token, name in (("Edg/", "Edge"), ("Firefox/", "Firefox"), ("Chrome/", "Chrome"),
                                             ("Safari/", "Safari")) if token in agent), "A browser")
    system = next((name for token, name in (("Android", "Android"), ("iPhone", "iPhone"), ("iPad", "iPad"),
                                            ("Windows", "Windows"), ("Mac OS", "macOS"), ("Linux", "Linux"))
                   if token in agent), "")
    return f"{browser} on {system}" if system else browser


class NotificationSettingsState(PageMixin, AuthState):
    """The grid of events × channels, the user's push devices and the push button's outcome."""

    rows: list[SettingRow] = []
    devices: list[DeviceRow] = []
    push_status: str = ""
    push_message: str = ""
    push_busy: bool = False

    def _refresh(self) -> None:
        with self._user_session() as (session, user):
            access = AccessContext(session, user)
            chosen = {(s.event, s.channel): s.enabled for s in NotificationSettings(access).list()}
            self.rows = [SettingRow(event=event, label=preferences.EVENT_LABELS[event],
                                    app=chosen[(event, preferences.APP)], mail=chosen[(event, preferences.MAIL)],
                                    push=chosen[(event, preferences.PUSH)]) for event in preferences.EVENTS]
            self.devices = [DeviceRow(id=s.id, label=_device_label(s.user_agent), error=s.last_error or "")
                            for s in PushSubscriptions(access).list()]
        self.loaded = True

    @rx.event
    @requires_door(NotificationSettings.list, PushSubscriptions.list)
    def load(self):
        """on_mount of the panel: the user's choices and subscribed browsers."""
        self.error = ""
        return self._reload()

    @rx.event
    @requires_door(NotificationSettings.change)
    def toggle(self, event: str, channel: str, enabled: bool):
        """Switch one event on one channel on or off for the user."""
        label = f"{preferences.EVENT_LABELS.get(event, event)} · {preferences.CHANNEL_LABELS.get(channel, channel)}"
        _ok, result = self._attempt(
            lambda session, user: NotificationSettings(AccessContext(session, user)).change(
                [(event, channel, bool(enabled))]),
            success=f"Saved: {label} {'on' if enabled else 'off'}.")
        return result

    @rx.event
    @requires_door(PushSubscriptions.public_key)
    def enable_push(self):
        """Ask the browser for permission and a push subscription with the server's key."""
        self.push_message, self.push_status = "", ""
        try:
            with self._user_session() as (session, user):
                key = PushSubscriptions(AccessContext(session, user)).public_key()
        except NotSignedIn:
            return self._signed_out()
        except (DomainError, ValueError) as exc:
            self.push_status, self.push_message = "error", f"Push is not available on this server: {exc}"
            return None
        self.push_busy = True
        return rx.call_script(ENABLE_PUSH_JS.replace("__KEY__", json.dumps(key)),
                              callback=NotificationSettingsState.push_result)

    @rx.event
    @requires_door(PushSubscriptions.subscribe)
    def push_result(self, result: Any):
        """What the browser answered: keep its subscription, or say why there is none."""
        self.push_busy = False
        outcome = result if isinstance(result, dict) else {}
        status = str(outcome.get("status") or "error")
        if status != "subscribed":
            self.push_status = status
            self.push_message = PUSH_MESSAGES.get(status) or (
                "This browser could not subscribe to push notifications"
                f"{': ' + str(outcome['message']) if outcome.get('message') else ''}. "
                "Its push service may be unreachable from here; try again later or in another browser.")
            return None
        subscription = outcome.get("subscription") or {}
        keys = subscription.get("keys") or {}

        def keep(session, user):
            PushSubscriptions(AccessContext(session, user)).subscribe(
                str(subscription.get("endpoint") or ""), str(keys.get("p256dh") or ""), str(keys.get("auth") or ""),
                str(outcome.get("userAgent") or ""))

        ok, event = self._attempt(keep)
        self.push_status = "subscribed" if ok else "error"
        self.push_message = ("Push is on for this browser: new tasks and failed runs appear as notifications."
                             if ok else f"The subscription was refused: {self.error}")
        self.error = ""
        return event

    @rx.event
    @requires_door(PushSubscriptions.remove)
    def remove_device(self, subscription_id: str):
        """Stop pushing to one of the user's browsers."""
        _ok, event = self._attempt(
            lambda session, user: PushSubscriptions(AccessContext(session, user)).remove(subscription_id),
            success="That browser gets no more push notifications.")
        return event

