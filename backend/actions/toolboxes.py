"""The toolboxes of spec §5.2: id, label, a one-line description and example requests.

The example requests (German and English) are what a user typically asks when a toolbox's tools
are needed; the agent's toolbox preselection (backend/agent/selector.py) ranks toolboxes by them,
together with the description and the tools' names, labels and descriptions.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Toolbox:
    """One toolbox.

    Attributes:
        id: Its id (`core`, `email`, … or `mcp:<name>` for a mandate's external MCP server).
        label: Short human name.
        description: One line, for people and for the agent's catalogue.
        examples: Typical requests that need it, in German and English (for the preselection);
            empty for toolboxes known only at run time.
    """

    id: str
    label: str
    description: str
    examples: tuple[str, ...] = ()


TOOLBOXES = (
    Toolbox("core", "Core", "Files of this workspace, web search and pages, language detection and translation", (
        "Search the web for the latest news about this topic",
        "Read this web page and tell me what it says",
        "List the files in my workspace folder",
        "Translate this text into French",
        "Which language is this text written in?",
        "Suche im Internet nach aktuellen Informationen",
        "Lies die Webseite und fasse den Inhalt zusammen",
        "Zeig mir die Dateien im Ordner Projekte",
        "Übersetze diesen Text ins Englische",
        "Speichere das als Textdatei im Arbeitsbereich",
    )),
    Toolbox("ai", "AI", "Summaries, images, speech, documents, charts, code and data neutralisation", (
        "Summarise this document in five bullet points",
        "Generate an image or draw a picture of a lake",
        "Create a bar chart of the monthly sales figures",
        "Turn this Markdown into a PDF report",
        "Remove the personal data, names and e-mail addresses from this text",
        "Transcribe the audio recording of the meeting",
        "Read this text aloud as an mp3 audio file",
        "Calculate this with a Python program",
        "Describe what is in this photo",
        "Fasse das Dokument in wenigen Sätzen zusammen",
        "Erzeuge ein Bild oder zeichne eine Illustration",
        "Zeichne ein Balken- oder Liniendiagramm aus dieser Tabelle",
        "Mach daraus ein Word-Dokument",
        "Anonymisiere die personenbezogenen Daten in diesem Text",
        "Transkribiere die Sprachaufnahme",
        "Was ist auf diesem Foto zu sehen?",
        "Berechne das mit einem Python-Skript",
    )),
    Toolbox("datasources", "Data sources", "Browse, search and transfer data of connected external sources", (
        "Browse my connected data sources and list what they hold",
        "Download the attachment of that mail into my workspace files",
        "Copy the contract from my mailbox attachment into the workspace",
        "Which connections do I have, and what data sources are connected?",
        "Extract the attachment from the mail and save it in my files",
        "Upload this workspace file to the connected data source",
        "Durchsuche meine verbundenen Datenquellen nach dem Vertrag",
        "Lade den Anhang der Mail in meine Dateien herunter",
        "Welche Datenquellen und Verbindungen habe ich?",
        "Speichere den Mail-Anhang im Arbeitsbereich",
        "Übertrage die Datei aus dem Arbeitsbereich in die externe Ablage",
    )),
    Toolbox("email", "E-mail",
            "Send e-mail through any connected mailbox; read, search and draft Outlook mail (Microsoft 365)", (
                "Send an e-mail to a colleague",
                "Read my latest e-mails in the inbox",
                "Do I have unread mail from the customer?",
                "Search my mailbox for the message from the supplier",
                "What did the customer write to me?",
                "Reply to the last mail and forward it to my colleague",
                "Draft a reply to the sender and save it in Outlook",
                "Write a mail to the team about the new meeting date",
                "Schick eine E-Mail an die Kollegin",
                "Lies meine neuesten Mails im Posteingang",
                "Habe ich ungelesene Nachrichten vom Kunden bekommen?",
                "Such in meinem Postfach nach der Nachricht vom Lieferanten",
                "Was hat mir der Kunde geschrieben?",
                "Beantworte die letzte Mail und leite sie weiter",
                "Schreib eine Mail an das Team und versende sie",
                "Erstelle einen Entwurf für die Antwort in Outlook",
            )),
    Toolbox("sharepoint", "SharePoint", "Find, read and upload SharePoint documents", (
        "Find the project plan on SharePoint",
        "Read the contract document in the Finance SharePoint site",
        "Upload the report to the SharePoint folder Documents/Reports",
        "List the SharePoint sites I can open",
        "What is in the shared documents library of our team site?",
        "Finde das Angebot auf SharePoint",
        "Lies das Dokument in der SharePoint-Bibliothek der Buchhaltung",
        "Lade die Präsentation in den SharePoint-Ordner hoch",
        "Welche SharePoint-Seiten gibt es?",
        "Was liegt im Teamordner auf der Intranet-Seite?",
    )),
    Toolbox("clickup", "ClickUp", "Search, read, create and update ClickUp tasks, comment and attach files", (
        "Create a ClickUp task for the website redesign",
        "Which of my ClickUp tasks are due this week?",
        "Change the status and priority of the task in ClickUp",
        "Comment on the ClickUp task",
        "Show the lists of our ClickUp space",
        "Assign the to-do to a colleague with high priority",
        "Erstelle eine Aufgabe in ClickUp für die Messevorbereitung",
        "Welche Aufgaben sind diese Woche fällig in ClickUp?",
        "Ändere den Status der ClickUp-Aufgabe",
        "Kommentiere die ClickUp-Aufgabe und häng die Datei an",
        "Zeig mir meine offenen Todos in ClickUp",
    )),
    Toolbox("jira", "Jira",
            "Search, read, create, update, move and comment on Jira issues; export and import tickets", (
                "Create a Jira bug for the login error",
                "Which Jira issues are open in our project?",
                "Transition the ticket to In Progress",
                "Assign the issue to a colleague and set its priority",
                "Comment on the Jira issue that the fix is deployed",
                "Export all open tickets of the sprint to CSV",
                "Import the tickets from this spreadsheet into Jira",
                "Show the bugs assigned to me with a JQL query",
                "Lege ein Jira-Ticket für den Fehler beim Login an",
                "Welche Jira-Tickets sind im Sprint noch offen?",
                "Verschiebe das Ticket in den Status In Arbeit",
                "Weise den Vorgang einem Bearbeiter zu",
                "Kommentiere den Jira-Vorgang mit dem aktuellen Stand",
                "Exportiere die offenen Bugs als CSV",
            )),
    Toolbox("workflow", "Workflow", "Read and change the workflow graph in the editor", (
        "Build a workflow with a trigger and an approval step",
        "Add a node to the workflow that waits five seconds",
        "Why did my last workflow run fail?",
        "List my workflows and their published versions",
        "Connect the trigger to the approval step in the graph",
        "Automate this process as a workflow with a human approval",
        "Erstelle einen Workflow mit einem Auslöser und einem Schritt",
        "Füge dem Ablauf einen Schritt hinzu",
        "Warum ist der letzte Lauf des Workflows fehlgeschlagen?",
        "Welche Workflows habe ich, und welche sind veröffentlicht?",
        "Automatisiere diesen Prozess mit einer Freigabe",
    )),
    Toolbox("trustee", "Trustee", "Extract and process bookkeeping documents", (
        "Extract the booking data from this receipt",
        "Process the invoices for the accounting",
        "Verbuche die Belege in der Buchhaltung",
        "Lies die Rechnungsdaten aus dem Beleg aus",
    )),
    Toolbox("chatbot", "Chatbot", "Query the chatbot's database", (
        "Query the database for the customers in Zurich",
        "Frag die Datenbank nach den Bestellungen",
    )),
    # Only for Feature Data Agents (sub-agents of spec §5.4); never requestable by a main agent.
    Toolbox("featureData", "Feature data", "Read-only browsing and querying of one feature instance's tables"),
)
TOOLBOX_IDS = tuple(t.id for t in TOOLBOXES)

# A mandate's external MCP server is the toolbox `mcp:<name>` (backend/mcp/): known only at run
# time, in that mandate, and used by the mandate roles its admins choose.
MCP_TOOLBOX_PREFIX = "mcp:"
