"""Pages whose capability has not been built yet: they say so instead of showing fake data."""

import reflex as rx

from components.shell import empty_state, gated, page_shell

# title: (icon, heading, text, the AuthState navigation flag that grants the page)
PENDING_PAGES = {
    "Workspace": ("message-square", "The AI workspace is not available yet",
                  "Chatting with the agent over your files and sources will appear here once "
                  "the AI service is set up in this version of PowerOn.", "nav_workspace"),
    "Editor": ("workflow", "The graphical editor is not available yet",
               "Workflows can already be created, renamed and deleted on the Workflows page and "
               "edited through the REST API; the visual canvas will appear here.", "nav_graphical_editor"),
    "Monitor": ("activity", "Nothing to monitor yet",
                "Running automations, next scheduled runs and error rates will appear here once "
                "workflows can be executed.", "nav_graphical_editor"),
    "Inbox": ("inbox", "Your inbox is empty",
              "Approvals and forms that workflows ask of you will appear here once workflows can "
              "be executed.", "nav_graphical_editor"),
}


def pending_page(title: str) -> rx.Component:
    icon, heading, text, flag = PENDING_PAGES[title]
    return page_shell(title, gated(flag, f"the {title} page", empty_state(icon, heading, text)))
