"""Notification settings and installability in real Chromium (issue 23, parts 4 and 5).

The Notifications page shows a grid of events × channels; a choice clicked there is saved and
still there after a reload. Every page links the web app manifest, whose icons (192 and 512 px,
"any" and "maskable") and the service worker are served at the root. Headless Chromium cannot
reach a real push service, so "Enable push on this device" is checked for the clear message it
gives (permission blocked; with permission, the push service unreachable) — sending and
decrypting pushes is covered against a stand-in push service in tests/integration/test_push.py.
"""

from __future__ import annotations

import io
import re

import pytest
from PIL import Image
from playwright.sync_api import Browser, Page, expect

from tests.e2e.conftest import ADMIN_PASSWORD, RunningApp
from tests.e2e.test_workflows_ui import sign_in

pytestmark = pytest.mark.e2e


def open_notifications(page: Page) -> None:
    sign_in(page, "admin", ADMIN_PASSWORD)
    expect(page).to_have_url(re.compile(r"/workflows$"))
    page.goto("/notifications")
    expect(page.locator("#page-title")).to_have_text("Notifications")
    expect(page.locator("#notification-settings")).to_be_visible()


def checkbox(page: Page, event: str, channel: str):
    return page.locator(f'#notification-settings [data-event="{event}"][data-channel="{channel}"]')


def test_a_setting_clicked_is_kept_after_a_reload(page: Page, running_app: RunningApp):
    open_notifications(page)
    rows = page.locator(".notification-setting-row")
    expect(rows).to_have_count(3)
    expect(rows.nth(0)).to_contain_text("Task assigned")
    expect(rows.nth(1)).to_contain_text("Task expiring")
    expect(rows.nth(2)).to_contain_text("Run failed")
    header = page.locator("#notification-settings thead")
    for label in ("In the app", "E-mail", "Push"):
        expect(header).to_contain_text(label)

    box = checkbox(page, "task.expiring", "mail")
    expect(box).to_have_attribute("data-state", "checked")
    box.click()
    expect(page.locator("#settings-notice")).to_have_text("Saved: Task expiring · E-mail off.")
    expect(box).to_have_attribute("data-state", "unchecked")

    page.reload()
    expect(checkbox(page, "task.expiring", "mail")).to_have_attribute("data-state", "unchecked")
    expect(checkbox(page, "task.expiring", "app")).to_have_attribute("data-state", "checked")
    expect(checkbox(page, "run.failed", "mail")).to_have_attribute("data-state", "checked")

    # And on again (the admin's other tests expect the defaults).
    checkbox(page, "task.expiring", "mail").click()
    expect(page.locator("#settings-notice")).to_have_text("Saved: Task expiring · E-mail on.")
    page.reload()
    expect(checkbox(page, "task.expiring", "mail")).to_have_attribute("data-state", "checked")


def test_the_app_is_installable_manifest_icons_and_service_worker(page: Page, running_app: RunningApp):
    page.goto("/login")
    manifest_link = page.locator('head link[rel="manifest"]')
    expect(manifest_link).to_have_count(1)
    expect(page.locator('head meta[name="theme-color"]')).to_have_attribute("content", "#3e63dd")
    expect(page.locator('head meta[name="apple-mobile-web-app-capable"]')).to_have_attribute("content", "yes")
    touch_icon = page.locator('head link[rel="apple-touch-icon"]').get_attribute("href")

    response = page.request.get(manifest_link.get_attribute("href"))
    assert response.ok, response.status
    manifest = response.json()
    assert (manifest["name"], manifest["short_name"], manifest["display"]) == ("PowerOn", "PowerOn", "standalone")
    assert manifest["start_url"] == "/inbox" and manifest["theme_color"] == "#3e63dd"
    seen = set()
    for icon in manifest["icons"]:
        image = page.request.get(icon["src"])
        assert image.ok and image.headers["content-type"] == "image/png", icon
        width, height = Image.open(io.BytesIO(image.body())).size
        assert f"{width}x{height}" == icon["sizes"], icon
        seen.add((icon["sizes"], icon["purpose"]))
    assert {("192x192", "any"), ("512x512", "any"), ("512x512", "maskable")} <= seen
    assert Image.open(io.BytesIO(page.request.get(touch_icon).body())).size == (180, 180)

    worker = page.request.get("/sw.js")
    assert worker.ok and "javascript" in worker.headers["content-type"]
    assert "showNotification" in worker.text() and "notificationclick" in worker.text()


def test_enable_push_says_why_there_is_no_subscription(browser: Browser, running_app: RunningApp):
    # Notifications blocked (headless Chromium's default for a page that asks): the page says so.
    context = browser.new_context(base_url=running_app.ui_url)
    context.set_default_timeout(30_000)
    try:
        page = context.new_page()
        open_notifications(page)
        page.locator("#enable-push").click()
        message = page.locator("#push-message")
        expect(message).to_be_visible()
        expect(message).to_have_attribute("data-status", re.compile(r"^(denied|dismissed)$"))
        expect(message).to_contain_text(re.compile(r"blocked for this site|permission question was closed"))
    finally:
        context.close()

    # Permission granted: the browser registers the service worker and asks its push service, which
    # this machine cannot reach; the page says the browser could not subscribe, and keeps nothing.
    context = browser.new_context(base_url=running_app.ui_url)
    context.set_default_timeout(60_000)
    try:
        context.grant_permissions(["notifications"], origin=running_app.ui_url)
        page = context.new_page()
        open_notifications(page)
        page.locator("#enable-push").click()
        message = page.locator("#push-message")
        expect(message).to_be_visible(timeout=60_000)
        expect(message).to_have_attribute("data-status", "error")
        expect(message).to_contain_text("This browser could not subscribe to push notifications")
        expect(page.locator("#push-devices")).to_have_count(0)
        assert page.evaluate("navigator.serviceWorker.getRegistration('/').then(r => !!r)")
    finally:
        context.close()
