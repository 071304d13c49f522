"""Workflow templates: ready-made graphs a new workflow can start from (POST …/workflows {templateId}).

Each template is a valid graph (DESIGN §4) laid out left to right (X_STEP between columns,
branches Y_STEP above and below; only a loop body's way back into its flow.loop goes left),
with sample test input that takes its main path (it becomes the new workflow's test input).
What a template needs beyond the embedded default installation is not written here: it is
derived from its graph (`Template.needs`, `Template.connections`), from what each node type
declares (backend/workflows/requirements.py). A template with no `connections`
runs as it is after `make run`.

What the user must pick is left empty in a template (`connectionId: ""`, a ClickUp `listId` or
`teamId`) and chosen in the editor: a run before a connection is chosen fails at once naming the
node (requirements.py); a list or workspace left empty is named by the step that needs it.
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

# What ties a ClickUp task to its Jira issue: a tag of the issue key ("jira-ops-101"; ClickUp keeps
# tag names in lower case). A run finds the tasks made before by it, so an issue becomes one task.
_ISSUE_TAG = "jira-{{ item.key | lower }}"

_JIRA_SYNC = Template(
    id="jira-to-clickup-sync",
    name="Jira → ClickUp sync",
    description="Every 15 minutes (Zurich time) finds the Jira issues of project OPS created in the last day "
                "(change the key in the JQL of 'New Jira issues') and creates a ClickUp task for each that has none "
                "yet: \"[KEY] summary\", with the Jira link and description, tagged with the issue key (jira-ops-101) "
                "so that a later run creates nothing again. Up to 100 issues a run, newest first. Choose your Jira "
                "connection in 'New Jira issues', your ClickUp connection and the same list in 'Already in "
                "ClickUp?' and 'Create the ClickUp task'.",
    category="integrations",
    graph={
        "nodes": [
            _node("start", "trigger.schedule", "Every 15 minutes", 0, cron="*/15 * * * *",
                  timezone="Europe/Zurich"),
            _node("issues", "jira.searchIssues", "New Jira issues", 1, connectionId="",
                  jql="project = OPS AND created >= -1d ORDER BY created DESC", fields=["description"],
                  maxResults=100),
            _node("each", "flow.loop", "Each issue", 2, items="{{ nodes.issues.output.issues }}"),
            _node("find", "clickup.searchTasks", "Already in ClickUp?", 3, connectionId="", listId="",
                  tags=[_ISSUE_TAG], includeClosed=True, limit=1),
            _node("new", "flow.ifElse", "No task yet?", 4, condition="{{ nodes.find.output.count == 0 }}"),
            _node("create", "clickup.createTask", "Create the ClickUp task", 5, connectionId="", listId="",
                  name="[{{ item.key }}] {{ item.summary }}",
                  description="Jira issue {{ item.key }}: {{ item.url }}\n\n{{ item.fields.description or '' }}",
                  tags=[_ISSUE_TAG]),
            _node("report", "context.transform", "What was created", 3, 1, data="{{ nodes.each.output }}",
                  template="{% set made = data | selectattr('url', 'defined') | list %}"
                  "{{ made | length }} new ClickUp task{{ '' if made | length == 1 else 's' }}"
                  "{% for task in made %}\n- {{ task.name }}: {{ task.url }}{% endfor %}"),
        ],
        "edges": [_edge("start", "issues"), _edge("issues", "each"), _edge("each", "find", "each"),
                  _edge("find", "new"), _edge("new", "create", "true"), _edge("create", "each"),
                  _edge("new", "each", "false"), _edge("each", "report", "done")],
    },
    # What the scheduler gives the trigger (a Test run stands in for a quarter-hour's run).
    sample_input={"scheduledAt": "2025-03-03T07:15:00+00:00", "triggerNodeId": "start"},
)

_OVERDUE_LIST = (
    "{% if data %}{{ data | length }} overdue ClickUp task{{ '' if data | length == 1 else 's' }}:\n"
    "{% for task in data %}\n- {{ task.name }}{% if task.list %} ({{ task.list.name }}){% endif %}\n"
    "  due {{ task.dueDate[:16] | replace('T', ' ') }} UTC · "
    "{% for person in task.assignees %}{{ person.username or person.email or person.id }}"
    "{% if not loop.last %}, {% endif %}{% else %}unassigned{% endfor %}\n"
    "  {{ task.url }}\n{% endfor %}{% else %}No overdue tasks.{% endif %}"
)

_OVERDUE = Template(
    id="clickup-overdue-mail",
    name="ClickUp overdue tasks → daily mail",
    description="Every day at 08:00 (Zurich time) finds the open tasks of a ClickUp workspace whose due date has "
                "passed (closed ones are left out) and mails you a list of them — name, list, due date, assignees, "
                "link — or \"No overdue tasks\". Choose your ClickUp connection and the workspace in 'Overdue "
                "tasks', a mail connection to send from in 'Mail the list', and put your address there.",
    category="integrations",
    graph={
        "nodes": [
            _node("start", "trigger.schedule", "Every day 08:00", 0, cron="0 8 * * *", timezone="Europe/Zurich"),
            _node("overdue", "clickup.searchTasks", "Overdue tasks", 1, connectionId="", teamId="",
                  overdueOnly=True, limit=200),
            _node("list", "context.transform", "List them", 2, data="{{ nodes.overdue.output.tasks }}",
                  template=_OVERDUE_LIST),
            _node("send", "email.sendMail", "Mail the list", 3, connectionId="", to=["you@example.com"],
                  subject="ClickUp: {{ nodes.overdue.output.count }} overdue task"
                          "{{ '' if nodes.overdue.output.count == 1 else 's' }} on {{ (now | isoformat)[:10] }}",
                  body="{{ nodes.list.output.result }}"),
        ],
        "edges": [_edge("start", "overdue"), _edge("overdue", "list"), _edge("list", "send")],
    },
    # What the scheduler gives the trigger (a Test run stands in for a morning's 08:00 run).
    sample_input={"scheduledAt": "2025-03-03T07:00:00+00:00", "triggerNodeId": "start"},
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

TEMPLATES: tuple[Template, ...] = (_APPROVAL, _DIGEST, _SUMMARY, _WEBHOOK, _ATTACHMENT, _JIRA_SYNC, _INBOX_DIGEST,
                                   _OVERDUE)


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

# Issue 22: a receipt that arrives by mail is read, proposed for booking, approved by a person and booked
# in a Trustee instance (the input's trusteeInstanceId; every trustee node takes it).
_TRUSTEE = "{{ input.trusteeInstanceId }}"
_RECEIPT_ID = "{{ nodes.extract.output.receipt.id }}"

_RECEIPT_BOOKING = Template(
    id="receipt-email-booking",
    name="Receipt e-mail → extract → approval → booking",
    description="Waits for a mail with an attached receipt (subject containing the input's subjectContains), lets "
                "the AI read the receipt into the Trustee instance named by the input's trusteeInstanceId, proposes "
                "its booking lines (the supplier's earlier account, else the AI's choice) and asks a Graphical "
                "Editor admin to approve; approved, the receipt is checked and booked. Choose your mail connection "
                "in the mail node.",
    category="documents",
    graph={
        "nodes": [
            _node("start", "trigger.manual", "Start", 0),
            _node("mail", "email.checkEmail", "Wait for the receipt mail", 1, connectionId="", folder="Inbox",
                  filter={"hasAttachment": True, "subjectContains": "{{ input.subjectContains | default('') }}"}),
            _node("extract", "trustee.extract", "Read the receipt", 2, files="{{ nodes.mail.output.files }}",
                  trusteeInstanceId=_TRUSTEE),
            _node("propose", "trustee.process", "Propose the booking", 3, receiptId=_RECEIPT_ID,
                  trusteeInstanceId=_TRUSTEE, book=False),
            _node("approve", "input.approval", "Approve the booking", 4,
                  title="Book {{ nodes.extract.output.receipt.supplier }}: {{ nodes.extract.output.receipt.total }} "
                        "{{ nodes.extract.output.receipt.currency }}",
                  message="Receipt {{ nodes.extract.output.receipt.file_name }} of "
                          "{{ nodes.extract.output.receipt.receipt_date }} from {{ nodes.mail.output.from }}: "
                          "total {{ nodes.extract.output.receipt.total }}, VAT "
                          "{{ nodes.extract.output.receipt.vat_amount }} ({{ nodes.extract.output.receipt.vat_code }})"
                          ". Proposed: {% for p in nodes.propose.output.positions %}{{ p.debit_account }} / "
                          "{{ p.credit_account }} {{ p.amount }} ({{ p.reason }}); {% endfor %}"
                          "{{ nodes.propose.output.warnings | join('; ') }}",
                  assignee={"role": "graphicalEditor-admin"}),
            _node("book", "trustee.process", "Book the receipt", 5, -1, receiptId=_RECEIPT_ID,
                  trusteeInstanceId=_TRUSTEE, book=True),
            _node("declined", "context.transform", "Not booked", 5, 1, data="{{ nodes.extract.output.receipt }}",
                  template="Receipt {{ file_name }} of {{ supplier }} was not booked (declined)."),
        ],
        "edges": [_edge("start", "mail"), _edge("mail", "extract"), _edge("extract", "propose"),
                  _edge("propose", "approve"), _edge("approve", "book", "approved"),
                  _edge("approve", "declined", "rejected")],
    },
    sample_input={"subjectContains": "Beleg", "trusteeInstanceId": ""},
)
TEMPLATES = (*TEMPLATES, _RECEIPT_BOOKING)
