"""The toolboxes of spec §5.2: id, label and a one-line description."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Toolbox:
    id: str
    label: str
    description: str


TOOLBOXES = (
    Toolbox("core", "Core", "Files of this workspace, web search and pages, language detection and translation"),
    Toolbox("ai", "AI", "Summaries, images, speech, documents, charts, code and data neutralisation"),
    Toolbox("datasources", "Data sources", "Browse, search and transfer data of connected external sources"),
    Toolbox("email", "E-mail",
            "Send e-mail through any connected mailbox; read, search and draft Outlook mail (Microsoft 365)"),
    Toolbox("sharepoint", "SharePoint", "Find, read and upload SharePoint documents"),
    Toolbox("clickup", "ClickUp", "Search, read, create and update ClickUp tasks, comment and attach files"),
    Toolbox("jira", "Jira", "Search, read, create, update, move and comment on Jira issues; export and import tickets"),
    Toolbox("workflow", "Workflow", "Read and change the workflow graph in the editor"),
    Toolbox("trustee", "Trustee", "Extract and process bookkeeping documents"),
    Toolbox("chatbot", "Chatbot", "Query the chatbot's database"),
    # Only for Feature Data Agents (sub-agents of spec §5.4); never requestable by a main agent.
    Toolbox("featureData", "Feature data", "Read-only browsing and querying of one feature instance's tables"),
)
TOOLBOX_IDS = tuple(t.id for t in TOOLBOXES)

# A mandate's external MCP server is the toolbox `mcp:<name>` (backend/mcp/): known only at run
# time, in that mandate, and used by the mandate roles its admins choose.
MCP_TOOLBOX_PREFIX = "mcp:"
