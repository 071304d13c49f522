"""Pages whose capability has not been built yet: they say so instead of showing fake data."""

import reflex as rx

from components.shell import empty_state, page_shell

PENDING_PAGES = {
    "Workspace": ("message-square", "The AI workspace is not available yet",
                  "Chatting with the agent over your files and sources will appear here once "
                  "the AI service is set up in this version of PowerOn."),
    "Editor": ("workflow", "The graphical editor is not available yet",
               "Workflows can already be created, renamed and deleted on the Workflows page and "
               "edited through the REST API; the visual canvas will appear here."),
    "Monitor": ("activity", "Nothing to monitor yet",
                "Running automations, next scheduled runs and error rates will appear here once "
                "workflows can be executed."),
    "Inbox": ("inbox", "Your inbox is empty",
              "Approvals and forms that workflows ask of you will appear here once workflows can "
              "be executed."),
    "Admin": ("shield", "Administration is not available yet",
              "Managing mandates, users, feature instances and roles will appear here."),
}


def pending_page(title: str) -> rx.Component:
    icon, heading, text = PENDING_PAGES[title]
    return page_shell(title, empty_state(icon, heading, text))
