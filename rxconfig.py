"""Reflex configuration. Ports: UI on 3000, API on 8000 (REFLEX_* variables override)."""

import reflex as rx

config = rx.Config(
    app_name="poweron_app",
    telemetry_enabled=False,
    frontend_port=3000,
    backend_port=8000,
    show_built_with_reflex=False,
    disable_plugins=[rx.plugins.SitemapPlugin],
    plugins=[rx.plugins.RadixThemesPlugin(theme=rx.theme(accent_color="indigo", radius="medium"))],
)
