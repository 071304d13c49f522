"""Workflow templates: ready-made graphs a new workflow can start from (POST …/workflows {templateId}).

Each template is a valid graph (DESIGN §4) laid out left to right (X_STEP between columns,
branches Y_STEP above and below). `connections` names what a template needs beyond the
embedded default installation: "ai" (an AI model), "web" (internet search), "msft" (a Microsoft
365 mail connection). A template with none runs as it is.

There are no SharePoint, Jira or ClickUp nodes yet: the templates that would use them use the
nearest real nodes (the workspace file store, a CSV export and import) and say so.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from backend.errors import NotFound

X_STEP, Y_STEP = 260, 120


@dataclass(frozen=True)
class Template:
    """A named starting graph; `graph` is returned as a fresh copy by template()/templates()."""

    id: str
    name: str
    description: str
    category: str
    connections: tuple[str, ...]
    graph: dict[str, Any]
    # The test input a workflow made from it starts with (the editor's Test run gives it to the trigger).
    sample_input: Any = None


def _node(node_id: str, node_type: str, label: str, column: int, row: int = 0, **parameters: Any) -> dict[str, Any]:
    return {"id": node_id, "type": node_type, "label": label, "parameters": parameters,
            "position": {"x": column * X_STEP, "y": row * Y_STEP}}


def _edge(source: str, target: str, handle: str | None = None) -> dict[str, Any]:
    return {"source": source, "target": target, **({"sourceHandle": handle} if handle else {})}


def _text(node_id: str, label: str, column: int, row: int, template: str) -> dict[str, Any]:
    """A context.transform node rendering `template` over the run input."""
    return _node(node_id, "context.transform", label, column, row, data="{{ input }}", template=template)


_APPROVAL = Template(
    id="expense-approval",
    name="Approval of large expenses",
    description="Started with an expense ({\"amount\": 2500, \"description\": \"…\", \"submittedBy\": \"…\"}). "
                "Up to 1000 CHF it is approved at once; above, a Graphical Editor admin approves or rejects it "
                "in their task list.",
    category="approvals",
    connections=(),
    graph={
        "nodes": [
            _node("start", "trigger.manual", "Expense submitted", 0),
            _node("big", "flow.ifElse", "More than 1000 CHF?", 1, condition="{{ input.amount > 1000 }}"),
            _node("approve", "input.approval", "Approval", 2, -1,
                  title="Approve expense of {{ input.amount }} CHF",
                  message="{{ input.description | default('no description') }} "
                          "(submitted by {{ input.submittedBy | default('unknown') }})",
                  assignee={"role": "graphicalEditor-admin"}),
            _text("auto", "Approved automatically", 2, 1,
                  "Expense of {{ amount }} CHF approved automatically (at most 1000 CHF)."),
            _text("approved", "Approved", 3, -2, "Expense of {{ amount }} CHF approved."),
            _text("rejected", "Rejected", 3, 0, "Expense of {{ amount }} CHF rejected."),
        ],
        "edges": [_edge("start", "big"), _edge("big", "approve", "true"), _edge("big", "auto", "false"),
                  _edge("approve", "approved", "approved"), _edge("approve", "rejected", "rejected")],
    },
    sample_input={"amount": 2500, "description": "Team offsite in Lucerne", "submittedBy": "Anna Muster"},
)

_DIGEST = Template(
    id="daily-web-digest",
    name="Daily web research digest",
    description="Every weekday at 07:00 (Zurich time) searches the web for a topic, lets the AI write a short "
                "digest with links and saves it in the workspace files under /digests. Change the search query "
                "in the 'Web search' node.",
    category="research",
    connections=("web", "ai"),
    graph={
        "nodes": [
            _node("start", "trigger.schedule", "Weekdays 07:00", 0, cron="0 7 * * 1-5", timezone="Europe/Zurich"),
            _node("search", "core.webSearch", "Web search", 1, query="workflow automation news", limit=8),
            _node("digest", "ai.prompt", "Write the digest", 2,
                  prompt="Write a short digest of these web search results: at most 5 bullet points, each "
                         "with its source link.\n\n{{ nodes.search.output.results | tojson }}",
                  systemPrompt="You write concise, factual news digests."),
            _node("save", "file.create", "Save the digest", 3,
                  path="/digests/digest-{{ run.id }}.md", content="{{ nodes.digest.output.text }}"),
        ],
        "edges": [_edge("start", "search"), _edge("search", "digest"), _edge("digest", "save")],
    },
)

_SUMMARY = Template(
    id="summarise-file",
    name="Summarise new files",
    description="Summarises a document's text and saves the summary next to it under /summaries. There is no "
                "file-upload event yet: start it by hand (or from another workflow) with "
                "{\"fileName\": \"report.pdf\", \"text\": \"…\"}.",
    category="documents",
    connections=("ai",),
    graph={
        "nodes": [
            _node("start", "trigger.manual", "New file", 0),
            _node("summary", "ai.summarize", "Summarise", 1, text="{{ input.text }}", maxWords=200,
                  style="bullets"),
            _node("save", "file.create", "Save the summary", 2,
                  path="/summaries/{{ input.fileName | default('file') }}.summary.md",
                  content="{{ nodes.summary.output.summary }}", overwrite=True),
        ],
        "edges": [_edge("start", "summary"), _edge("summary", "save")],
    },
)

_NOTIFY_CODE = '''def main(input):
    """Turn the webhook's body into a notification: title, message and urgency."""
    body = input["input"].get("body") if isinstance(input["input"], dict) else None
    body = body if isinstance(body, dict) else {"text": body}
    title = str(body.get("title") or body.get("event") or "Webhook received")
    message = str(body.get("message") or body.get("text") or "")
    return {"title": title, "message": message, "urgent": body.get("severity") in ("high", "critical")}
'''

_WEBHOOK = Template(
    id="webhook-notification",
    name="Webhook to notification",
    description="A signed webhook call (POST /api/hooks/<workflowId>/incoming) becomes a notification: a Python "
                "step turns the body into title and message; urgent ones (severity high or critical) end the run "
                "as failed, which notifies the workflow's owner in the app and by e-mail. Set the webhook's "
                "secret before publishing; there is no e-mail node yet.",
    category="integrations",
    connections=(),
    graph={
        "nodes": [
            _node("start", "trigger.webhook", "Webhook", 0, path="incoming", method="POST"),
            _node("compose", "script.python", "Compose notification", 1, code=_NOTIFY_CODE, timeoutSeconds=10),
            _node("urgent", "flow.ifElse", "Urgent?", 2, condition="{{ nodes.compose.output.urgent }}"),
            _node("alert", "flow.stop", "Notify the owner", 3, -1, status="failed",
                  message="{{ nodes.compose.output.title }}: {{ nodes.compose.output.message }}"),
            _node("done", "flow.stop", "Done", 3, 1, status="completed"),
        ],
        "edges": [_edge("start", "compose"), _edge("compose", "urgent"), _edge("urgent", "alert", "true"),
                  _edge("urgent", "done", "false")],
    },
)

_ATTACHMENT = Template(
    id="email-attachment-analysis",
    name="E-mail attachment → AI analysis → SharePoint upload",
    description="Waits for an e-mail with an attachment in a Microsoft 365 mailbox, lets the AI analyse it and "
                "stores the analysis. There is no SharePoint node yet: the analysis is saved in the workspace files "
                "under /analyses (replace that node once a SharePoint connector exists). Set the mail "
                "connection in the 'Wait for e-mail' node.",
    category="documents",
    connections=("msft", "ai"),
    graph={
        "nodes": [
            _node("start", "trigger.manual", "Start", 0),
            _node("mail", "email.checkEmail", "Wait for e-mail", 1, connectionId="", folder="Inbox"),
            _node("analyse", "ai.process", "Analyse the attachment", 2,
                  prompt="Analyse the attachment of this e-mail: what it is, the key facts and figures, and "
                         "anything that needs action.",
                  input="{{ nodes.mail.output }}"),
            _node("upload", "file.create", "Store the analysis", 3,
                  path="/analyses/analysis-{{ run.id }}.md", content="{{ nodes.analyse.output.text }}"),
        ],
        "edges": [_edge("start", "mail"), _edge("mail", "analyse"), _edge("analyse", "upload")],
    },
)

_JIRA_CODE = '''import csv
import io


def main(input):
    """Map a Jira CSV export to the columns of ClickUp's CSV import."""
    rows = list(csv.DictReader(io.StringIO(input["input"]["csv"])))
    columns = {"Task Name": "Summary", "Task Content": "Description", "Status": "Status",
               "Priority": "Priority", "Assignee": "Assignee", "Due Date": "Due Date", "Tags": "Labels"}
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(columns))
    writer.writeheader()
    for row in rows:
        writer.writerow({target: row.get(source, "") for target, source in columns.items()})
    return {"csv": out.getvalue(), "count": len(rows)}
'''

_JIRA = Template(
    id="jira-to-clickup",
    name="Jira export to ClickUp",
    description="Converts a Jira issue export (CSV, started with {\"csv\": \"…\"}) into a ClickUp CSV import file "
                "in the workspace files under /exports. There are no Jira or ClickUp nodes yet: export from Jira "
                "and import into ClickUp by hand; the mapping of the columns is in the Python step.",
    category="integrations",
    connections=(),
    graph={
        "nodes": [
            _node("start", "trigger.manual", "Jira CSV export", 0),
            _node("convert", "script.python", "Map to ClickUp columns", 1, code=_JIRA_CODE, timeoutSeconds=30),
            _node("save", "file.create", "ClickUp import file", 2,
                  path="/exports/clickup-import-{{ run.id }}.csv", content="{{ nodes.convert.output.csv }}",
                  mimeType="text/csv"),
        ],
        "edges": [_edge("start", "convert"), _edge("convert", "save")],
    },
)

TEMPLATES: tuple[Template, ...] = (_APPROVAL, _DIGEST, _SUMMARY, _WEBHOOK, _ATTACHMENT, _JIRA)


def _copy(found: Template) -> Template:
    return Template(found.id, found.name, found.description, found.category, found.connections,
                    copy.deepcopy(found.graph), copy.deepcopy(found.sample_input))


def templates() -> list[Template]:
    """Every template, in catalogue order (each with its own copy of the graph)."""
    return [_copy(t) for t in TEMPLATES]


def template(template_id: str) -> Template:
    """The template `template_id`; NotFound naming the known ids."""
    for found in TEMPLATES:
        if found.id == template_id:
            return _copy(found)
    raise NotFound(f"template '{template_id}' not found; the templates are: {', '.join(t.id for t in TEMPLATES)}")
