"""The Trustee page: the receipts inbox (upload, many at once, with each file's extraction), the review
of one receipt beside its document (fields, proposals accepted line by line, Book), and the journal
(filters, totals, CSV/XLSX export, sync to Bexio).

A viewer reads everything and is offered nothing they may not do: no upload, no Checked, no Accept,
no Book and no Sync (the door answers what the user may do; it checks again on every call).
"""

import reflex as rx
from reflex.vars import ArrayVar, ObjectVar

from components.shell import empty_state, gated, page_shell
from components.tables import data_table
from components.trustee import review_panel, status_badge
from state.trustee import ALL, PositionRow, ReceiptRow, TrusteeState

UPLOAD_ID = "trustee-upload"
RECEIPT_STATUSES = ("draft", "checked", "booked", "synced")
JOURNAL_STATUSES = ("booked", "synced")


def _messages() -> rx.Component:
    return rx.fragment(
        rx.cond(TrusteeState.error != "",
                rx.callout(TrusteeState.error, icon="triangle-alert", color_scheme="red", id="trustee-error",
                           width="100%")),
        rx.cond(TrusteeState.notice != "",
                rx.callout(TrusteeState.notice, icon="check", color_scheme="green", id="trustee-notice",
                           width="100%")),
    )


def _status_select(value: rx.Var, on_change, statuses: tuple[str, ...], select_id: str) -> rx.Component:
    return rx.select.root(
        rx.select.trigger(id=select_id, min_width="9em"),
        rx.select.content(rx.select.item("Any status", value=ALL),
                          *[rx.select.item(s.capitalize(), value=s) for s in statuses]),
        value=value, on_change=on_change, size="2",
    )


# --- the inbox ----------------------------------------------------------------------------------


def _upload() -> rx.Component:
    def rejected_names(rejected):
        """Only the refused files' names go to the server (never the files themselves)."""
        names = rejected.to(ArrayVar, list[dict]).map(
            lambda r: r.to(ObjectVar, dict[str, dict])["file"].to(ObjectVar, dict)["name"])
        return TrusteeState.upload_rejected(names)

    return rx.cond(
        TrusteeState.can_upload,
        rx.vstack(
            rx.upload(
                rx.vstack(
                    rx.icon("upload", size=22, color=rx.color("gray", 10)),
                    rx.text("Drop receipts here (PDF or images, many at once) or click to choose", size="2"),
                    rx.text("Each file is extracted right after it arrives. Files up to ", TrusteeState.file_limit,
                            ".", size="1", color_scheme="gray"),
                    align="center", spacing="1",
                ),
                id=UPLOAD_ID,
                multiple=True,
                max_size=TrusteeState.file_max_bytes,
                on_drop=TrusteeState.handle_upload(
                    rx.upload_files(upload_id=UPLOAD_ID, on_upload_progress=TrusteeState.upload_progress)),
                on_drop_rejected=rejected_names,
                border=f"1px dashed {rx.color('gray', 7)}", border_radius="8px", padding="1em",
                width="100%", cursor="pointer",
            ),
            rx.cond(TrusteeState.uploading,
                    rx.progress(value=TrusteeState.upload_percent, max=100, id="trustee-upload-progress",
                                width="100%")),
            width="100%", spacing="1", id="trustee-upload-area",
        ),
        rx.text(rx.icon("eye", size=14), "You can read the receipts and the journal here; your roles do not let "
                "you upload or book.", id="trustee-read-only", size="2", color_scheme="gray",
                display="flex", align_items="center", gap="0.4em"),
    )


def _extraction(row: ReceiptRow) -> rx.Component:
    """A receipt's extraction: under way, or its outcome (with the reason when it found no receipt)."""
    colour = rx.match(row["extraction_status"], ("done", "green"), ("failed", "red"), ("not_receipt", "orange"),
                      "gray")
    return rx.cond(
        TrusteeState.extracting.contains(row["id"]),
        rx.hstack(rx.spinner(size="1"), rx.text("Extracting…", size="1"), spacing="1", align="center",
                  class_name="receipt-extracting"),
        rx.vstack(
            rx.badge(row["extraction_label"], color_scheme=colour, variant="soft", class_name="receipt-extraction"),
            rx.cond(row["extraction_message"] != "",
                    rx.text(row["extraction_message"], size="1", color_scheme="gray",
                            class_name="receipt-extraction-message")),
            spacing="1",
        ),
    )


def _receipt_row(row: ReceiptRow) -> rx.Component:
    may_extract = TrusteeState.can_extract & (row["status"] == "draft") & (row["extraction_status"] != "done") & \
        ~TrusteeState.extracting.contains(row["id"])
    return rx.table.row(
        rx.table.cell(rx.link(row["file_name"], on_click=TrusteeState.open_receipt(row["id"]), cursor="pointer",
                              class_name="receipt-name")),
        rx.table.cell(row["supplier"], class_name="receipt-supplier"),
        rx.table.cell(row["date"], class_name="receipt-date", white_space="nowrap"),
        rx.table.cell(row["total"], class_name="receipt-total", white_space="nowrap", text_align="right"),
        rx.table.cell(status_badge(row["status"], "receipt-status")),
        rx.table.cell(_extraction(row)),
        rx.table.cell(rx.hstack(
            rx.button("Review", size="1", variant="soft", class_name="receipt-open",
                      on_click=TrusteeState.open_receipt(row["id"])),
            rx.cond(may_extract, rx.button(rx.icon("scan-text", size=12), "Extract", size="1", variant="soft",
                                           class_name="receipt-extract", on_click=TrusteeState.extract(row["id"]))),
            spacing="1")),
        class_name="receipt-row",
    )


def _extraction_trigger() -> rx.Component:
    """Starts the extraction worker whenever receipts wait and none runs (mounted only then)."""
    return rx.cond(
        (TrusteeState.extracting.length() > 0) & ~TrusteeState.extraction_running,
        rx.box(on_mount=TrusteeState.run_extractions, display="none", id="extraction-trigger"),
    )


def inbox_panel() -> rx.Component:
    return rx.vstack(
        _upload(),
        rx.hstack(
            rx.heading("Receipts", size="3"),
            rx.spacer(),
            _status_select(TrusteeState.receipt_filter, TrusteeState.filter_receipts, RECEIPT_STATUSES,
                           "receipt-filter"),
            width="100%", align="center",
        ),
        rx.cond(
            TrusteeState.receipts.length() > 0,
            data_table(("File", "Supplier", "Date", "Total", "Status", "Extraction", ""), TrusteeState.receipts,
                       _receipt_row, "receipt-list"),
            rx.text(rx.cond(TrusteeState.receipt_filter != ALL, "No receipt has this status.",
                            rx.cond(TrusteeState.can_upload, "No receipts yet: drop the first ones above.",
                                    "No receipts yet.")),
                    size="2", color_scheme="gray", id="receipt-list-empty"),
        ),
        width="100%", spacing="3",
    )


# --- the journal --------------------------------------------------------------------------------


def _journal_row(line: PositionRow) -> rx.Component:
    return rx.table.row(
        rx.table.cell(line["date"], white_space="nowrap"),
        rx.table.cell(line["debit"], class_name="journal-debit"),
        rx.table.cell(line["credit"], class_name="journal-credit"),
        rx.table.cell(line["amount"], class_name="journal-amount", text_align="right"),
        rx.table.cell(line["vat_code"]),
        rx.table.cell(line["vat_amount"], text_align="right"),
        rx.table.cell(line["text"], class_name="journal-text"),
        rx.table.cell(status_badge(line["status"], "journal-status")),
        class_name="journal-row",
    )


def _filter_input(name: str, label: str, value: rx.Var, kind: str = "text", width: str = "10em") -> rx.Component:
    return rx.vstack(
        rx.text(label, size="1", color_scheme="gray"),
        rx.input(name=name, id=f"journal-{name.replace('date_', '')}", default_value=value, type=kind, size="2",
                 width=width),
        spacing="1",
    )


def _filters() -> rx.Component:
    return rx.form(
        rx.hstack(
            _filter_input("date_from", "Date from", TrusteeState.journal_from, "date"),
            _filter_input("date_to", "Date to", TrusteeState.journal_to, "date"),
            _filter_input("account", "Account", TrusteeState.journal_account, width="7em"),
            _filter_input("text", "Text", TrusteeState.journal_text, width="10em"),
            rx.vstack(rx.text("Status", size="1", color_scheme="gray"),
                      _status_select(TrusteeState.journal_status, TrusteeState.set_journal_status, JOURNAL_STATUSES,
                                     "journal-status-filter"), spacing="1"),
            rx.button(rx.icon("filter", size=14), "Apply", type="submit", id="journal-apply"),
            rx.button("Reset", type="button", variant="soft", on_click=TrusteeState.reset_filters,
                      id="journal-reset"),
            align="end", spacing="3", wrap="wrap",
        ),
        on_submit=TrusteeState.apply_filters, reset_on_submit=False, width="100%",
        key=TrusteeState.journal_form_key,
    )


def _sync() -> rx.Component:
    result = rx.cond(
        TrusteeState.sync_done,
        rx.callout(
            rx.vstack(
                rx.text(rx.text.strong("Synced ", TrusteeState.sync_synced), " · ", TrusteeState.sync_message),
                rx.foreach(TrusteeState.sync_failures,
                           lambda failure: rx.text(failure, size="2", class_name="sync-failure")),
                spacing="1",
            ),
            icon=rx.cond(TrusteeState.sync_failures.length() > 0, "triangle-alert", "check"),
            color_scheme=rx.cond(TrusteeState.sync_failures.length() > 0, "orange", "green"),
            id="sync-result", width="100%",
        ),
    )
    return rx.cond(
        TrusteeState.can_sync,
        rx.vstack(
            rx.cond(
                TrusteeState.connections.length() > 0,
                rx.hstack(
                    rx.text("Bexio connection", size="2"),
                    rx.select.root(
                        rx.select.trigger(id="journal-connection", min_width="14em"),
                        rx.select.content(rx.foreach(TrusteeState.connections,
                                                     lambda c: rx.select.item(c["label"], value=c["value"]))),
                        value=TrusteeState.sync_connection_id, on_change=TrusteeState.set_sync_connection,
                    ),
                    rx.button(rx.icon("refresh-cw", size=14), "Sync to Bexio", on_click=TrusteeState.sync,
                              id="journal-sync", disabled=TrusteeState.sync_connection_id == ""),
                    align="center", spacing="3", wrap="wrap",
                ),
                rx.callout(
                    rx.text("There is no Bexio connection you may use yet. Add one on the ",
                            rx.link("Connections page", href="/connections", id="bexio-connections-link"),
                            ", then sync the booked lines from here."),
                    icon="plug", color_scheme="gray", id="bexio-hint", width="100%",
                ),
            ),
            result,
            width="100%", spacing="2",
        ),
    )


def journal_panel() -> rx.Component:
    return rx.vstack(
        _filters(),
        rx.hstack(
            rx.text(TrusteeState.journal_rows.length(), " lines · total ", rx.text.strong(TrusteeState.journal_total),
                    size="2", id="journal-total"),
            rx.spacer(),
            rx.button(rx.icon("download", size=14), "CSV", variant="soft", on_click=TrusteeState.export("csv"),
                      id="journal-export-csv"),
            rx.button(rx.icon("sheet", size=14), "XLSX", variant="soft", on_click=TrusteeState.export("xlsx"),
                      id="journal-export-xlsx"),
            width="100%", align="center", spacing="2",
        ),
        rx.cond(
            TrusteeState.journal_rows.length() > 0,
            data_table(("Date", "Debit", "Credit", "Amount", "VAT code", "VAT", "Text", "Status"),
                       TrusteeState.journal_rows, _journal_row, "journal-table"),
            rx.text("No booked lines match.", size="2", color_scheme="gray", id="journal-empty"),
        ),
        _sync(),
        width="100%", spacing="3",
    )


# --- the page -----------------------------------------------------------------------------------


def _tabs() -> rx.Component:
    return rx.tabs.root(
        rx.tabs.list(
            rx.tabs.trigger("Receipts", value="receipts", id="tab-receipts"),
            rx.tabs.trigger("Review", value="review", id="tab-review", disabled=TrusteeState.open_id == ""),
            rx.tabs.trigger("Journal", value="journal", id="tab-journal"),
        ),
        rx.tabs.content(inbox_panel(), value="receipts", padding_top="1em"),
        rx.tabs.content(rx.cond(TrusteeState.open_id != "", review_panel()), value="review", padding_top="1em"),
        rx.tabs.content(journal_panel(), value="journal", padding_top="1em"),
        value=TrusteeState.tab, on_change=TrusteeState.set_tab, width="100%",
    )


def trustee_page() -> rx.Component:
    return page_shell(
        "Trustee",
        gated(
            "nav_trustee", "the Trustee page",
            rx.cond(
                TrusteeState.loaded & (TrusteeState.instance_id == ""),
                empty_state("lock", "No Trustee instance",
                            "You have no access to a Trustee instance. Ask an administrator of your mandate to "
                            "give you a role in one."),
                rx.vstack(_messages(), _tabs(), _extraction_trigger(), width="100%", spacing="3"),
            ),
        ),
        instance=TrusteeState,
    )
