"""Workflow templates: ready-made graphs a new workflow can start from (POST …/workflows {templateId}).

Each template is a valid graph (DESIGN §4) laid out left to right (X_STEP between columns,
branches Y_STEP above and below), with sample test input that takes its main path (it becomes the
new workflow's test input). What a template needs beyond the embedded default installation is not
written here: it is derived from its graph (`Template.needs`, `Template.connections`), from what
each node type declares (backend/workflows/requirements.py). A template with no `connections`
runs as it is after `make run`.

There are no Jira or ClickUp nodes yet: the template that would use them uses the nearest real
nodes (the workspace file store, a CSV export and import) and says so.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from backend.errors import NotFound
from backend.workflows import requirements

X_STEP, Y_STEP = 260, 120


@dataclass(frozen=True)
class Template:
    """A named starting graph; `graph` is returned as a fresh copy by template()/templates()."""

    id: str
    name: str
    description: str
    category: str
    graph: dict[str, Any]
    # The test input a workflow made from it starts with (the editor's Test run gives it to the trigger).
    sample_input: Any = None

    @property
    def connections(self) -> tuple[str, ...]:
        """What it needs beyond the embedded default (requirement ids, e.g. "ai"); empty: runs as it is."""
        return requirements.connections(self.graph)

    def needs(self) -> list[requirements.Need]:
        """What its nodes need, each checked against this installation (for the card before use)."""
        return requirements.graph_needs(self.graph)

    @staticmethod
    def runs_as_it_is(needs: list[requirements.Need]) -> bool:
        """Whether, with `needs` (from :meth:`needs`), it runs here as it is: nothing is missing."""
        return requirements.runs_as_it_is(needs)


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
    description="Started with an expense (amount in CHF, description, submittedBy). Up to 1000 CHF it is "
                "approved at once; above, a Graphical Editor admin approves or rejects it in their Inbox.",
    category="approvals",
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
    # What the scheduler gives the trigger (a Test run stands in for Monday's 07:00 run).
    sample_input={"scheduledAt": "2025-03-03T06:00:00+00:00", "triggerNodeId": "start"},
)

_SUMMARY = Template(
    id="summarise-file",
    name="Summarise new files",
    description="Summarises a document's text and saves the summary under /summaries in the workspace files. "
                "There is no file-upload event yet: start it by hand (or from another workflow) with the file's "
                "name and text (fileName, text).",
    category="documents",
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
    sample_input={
        "fileName": "q3-sales-report.pdf",
        "text": "Q3 sales report. Revenue reached CHF 4.2 million, 12% more than in Q2, driven by the new "
                "service contracts in Zurich and Basel. The gross margin fell from 41% to 38% because of higher "
                "hardware costs. Two large customers renewed for three years; one (Muster AG) gave notice for "
                "the end of the year. Next steps: renegotiate the hardware supply contract by November and hire "
                "two sales engineers for the Geneva office.",
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
    # A webhook run's input: the JSON body, the headers (names lower-cased) and the query string.
    sample_input={
        "body": {"event": "backup.finished", "title": "Nightly backup finished",
                 "message": "All 3 databases were backed up in 4 minutes.", "severity": "low"},
        "headers": {"content-type": "application/json", "webhook-id": "msg_2a7Kx9"},
        "query": {},
    },
)

# What the SharePoint names of one mail start with: when it arrived ("2025-03-03 0915"), so that two
# mails bringing "invoice.pdf" file two documents instead of refusing the second (nothing is replaced).
_RECEIVED = "{{ nodes.mail.output.receivedAt[:16] | replace('T', ' ') | replace(':', '') }}"
_FIRST_ATTACHMENT = "{{ (nodes.mail.output.attachments | first).name }}"

_ATTACHMENT = Template(
    id="email-attachment-analysis",
    name="E-mail attachment → AI analysis → SharePoint upload",
    description="Waits for a Microsoft 365 mail with an attachment (subject containing the input's "
                "subjectContains), lets the AI analyse it and files the analysis and the attachment in the "
                "input's SharePoint site and folder (which must exist). Choose your Microsoft 365 connection in "
                "the mail node and both upload nodes.",
    category="documents",
    graph={
        "nodes": [
            _node("start", "trigger.manual", "Start", 0),
            _node("mail", "email.checkEmail", "Wait for e-mail", 1, connectionId="", folder="Inbox",
                  filter={"hasAttachment": True, "subjectContains": "{{ input.subjectContains | default('') }}"}),
            _node("analyse", "ai.process", "Analyse the attachment", 2,
                  prompt="Analyse the attachment of this e-mail: what it is, the key facts and figures (amounts, "
                         "dates, parties), and anything that needs action. Answer in Markdown.",
                  input={"from": "{{ nodes.mail.output.from }}", "subject": "{{ nodes.mail.output.subject }}",
                         "body": "{{ nodes.mail.output.body }}"},
                  files="{{ nodes.mail.output.files }}"),
            _node("save", "file.create", "Keep the analysis", 3,
                  path=f"/analyses/{{{{ run.id }}}}/{_RECEIVED} {_FIRST_ATTACHMENT} - analysis.md",
                  content="{{ nodes.analyse.output.text }}", mimeType="text/markdown"),
            _node("upload", "sharepoint.upload", "Upload the analysis", 4, connectionId="",
                  file="{{ nodes.save.output.path }}", site="{{ input.site }}", folderPath="{{ input.folder }}"),
            _node("original", "sharepoint.upload", "Upload the attachment", 5, connectionId="",
                  file="{{ nodes.mail.output.files | first }}", site="{{ input.site }}",
                  folderPath="{{ input.folder }}", name=f"{_RECEIVED} {_FIRST_ATTACHMENT}"),
        ],
        "edges": [_edge("start", "mail"), _edge("mail", "analyse"), _edge("analyse", "save"),
                  _edge("save", "upload"), _edge("upload", "original")],
    },
    sample_input={"subjectContains": "Invoice", "site": "Finance", "folder": "/Documents/Invoices"},
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
    description="Converts a Jira issue export (the CSV text as input csv) into a ClickUp CSV import file "
                "in the workspace files under /exports. There are no Jira or ClickUp nodes yet: export from Jira "
                "and import into ClickUp by hand; the mapping of the columns is in the Python step.",
    category="integrations",
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
    sample_input={"csv": (
        "Issue key,Summary,Description,Status,Priority,Assignee,Due Date,Labels\n"
        "OPS-101,Renew TLS certificates,Certificates of the customer portal expire on 30 April.,To Do,High,"
        "Anna Muster,2025-04-15,security\n"
        "OPS-102,Move backups to the new storage,\"Copy the nightly backups, then switch the job.\",In Progress,"
        "Medium,Ben Keller,2025-05-02,infrastructure\n"
        "OPS-103,Document the on-call rota,,Done,Low,Carla Rossi,,docs\n")},
)

_INBOX_DIGEST = Template(
    id="daily-inbox-digest",
    name="Daily inbox digest mail",
    description="Every day at 08:00 (Zurich time) reads the newest mails of a mailbox's inbox, lets the AI write "
                "a short digest (who wrote about what, what needs action) and mails it to you from the same "
                "mailbox. Choose the mail connection in the 'Read the newest mails' node and put your address in "
                "the 'Send the digest' node.",
    category="email",
    graph={
        "nodes": [
            _node("start", "trigger.schedule", "Every day 08:00", 0, cron="0 8 * * *", timezone="Europe/Zurich"),
            _node("read", "datasources.readContentObjects", "Read the newest mails", 1, connectionId="",
                  container="/Inbox", limit=20, maxChars=2000),
            _node("digest", "ai.prompt", "Write the digest", 2,
                  prompt="Write a short digest of these e-mails for their recipient: one bullet point per mail "
                         "(sender, subject, the gist in one sentence), then a list of what needs action. If there "
                         "are none, say the inbox had no new mail.\n\n{{ nodes.read.output.items | tojson }}",
                  systemPrompt="You summarise e-mail concisely and factually; you never invent mails."),
            _node("send", "email.sendMail", "Send the digest", 3, connectionId="{{ nodes.read.output.connectionId }}",
                  to=["you@example.com"], subject="Your inbox digest of {{ (now | isoformat)[:10] }}",
                  body="{{ nodes.digest.output.text }}"),
        ],
        "edges": [_edge("start", "read"), _edge("read", "digest"), _edge("digest", "send")],
    },
    # What the scheduler gives the trigger (a Test run stands in for a morning's 08:00 run).
    sample_input={"scheduledAt": "2025-03-03T07:00:00+00:00", "triggerNodeId": "start"},
)

TEMPLATES: tuple[Template, ...] = (_APPROVAL, _DIGEST, _SUMMARY, _WEBHOOK, _ATTACHMENT, _JIRA, _INBOX_DIGEST)


def _copy(found: Template) -> Template:
    return Template(found.id, found.name, found.description, found.category, copy.deepcopy(found.graph),
                    copy.deepcopy(found.sample_input))


def templates() -> list[Template]:
    """Every template, in catalogue order (each with its own copy of the graph)."""
    return [_copy(t) for t in TEMPLATES]


def template(template_id: str) -> Template:
    """The template `template_id`; NotFound naming the known ids."""
    for found in TEMPLATES:
        if found.id == template_id:
            return _copy(found)
    raise NotFound(f"template '{template_id}' not found; the templates are: {', '.join(t.id for t in TEMPLATES)}")
