"""What makes the app installable on a phone's home screen (issue 23): the `<head>` tags of every page.

The manifest, icons and service worker live in assets/ (Reflex serves that folder at the root):
/manifest.webmanifest, /icons/*.png, /sw.js. poweron_app/poweron_app.py adds these tags to the app.
"""

from __future__ import annotations

import reflex as rx

THEME_COLOR = "#3e63dd"  # the theme's accent (Radix indigo 9), as in the manifest
MANIFEST = "/manifest.webmanifest"


def pwa_head_components() -> list[rx.Component]:
    """The manifest link, theme colour and the home-screen tags iOS reads instead of the manifest."""
    return [
        rx.el.link(rel="manifest", href=MANIFEST),
        rx.el.meta(name="theme-color", content=THEME_COLOR),
        rx.el.link(rel="apple-touch-icon", href="/icons/apple-touch-icon.png"),
        rx.el.meta(name="apple-mobile-web-app-capable", content="yes"),
        rx.el.meta(name="mobile-web-app-capable", content="yes"),
        rx.el.meta(name="apple-mobile-web-app-title", content="PowerOn"),
        rx.el.meta(name="apple-mobile-web-app-status-bar-style", content="default"),
    ]
