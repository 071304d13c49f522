"""Pages whose capability has not been built yet: they say so instead of showing fake data."""

import reflex as rx

from components.shell import empty_state, gated, page_shell

# title: (icon, heading, text, the AuthState navigation flag that grants the page)
PENDING_PAGES = {
    "Monitor": ("activity", "The monitoring page is not built yet",
                "Workflows already run on schedules, webhooks and events; their run history is available "
                "through the REST API (…/workflows/{workflowId}/runs) and failures reach you as "
                "notifications. The dashboard will appear here.", "nav_graphical_editor"),
    "Inbox": ("inbox", "The inbox page is not built yet",
              "Approvals and forms that workflows ask of you are already listed and completed through "
              "the REST API (/api/tasks); they will appear here.", "nav_graphical_editor"),
}


def pending_page(title: str) -> rx.Component:
    icon, heading, text, flag = PENDING_PAGES[title]
    return page_shell(title, gated(flag, f"the {title} page", empty_state(icon, heading, text)))
