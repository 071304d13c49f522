"""The Trustee page's review: the receipt's document beside its fields, and its booking lines."""

from __future__ import annotations

import reflex as rx

from state.trustee import EDITABLE, FIELDS, Choice, PositionRow, TrusteeState

STATUS_COLOURS = {"draft": "gray", "checked": "blue", "booked": "green", "synced": "grass",
                  "proposed": "amber", "accepted": "green", "rejected": "red"}


def status_badge(status: rx.Var, class_name: str) -> rx.Component:
    """A receipt's or line's status in its colour."""
    return rx.badge(status, class_name=class_name, variant="soft",
                    color_scheme=rx.match(status, *STATUS_COLOURS.items(), "gray"))


# --- the document -------------------------------------------------------------------------------


def document_pane() -> rx.Component:
    """The receipt as uploaded (an image, or the PDF embedded) and the text the extraction read."""
    return rx.vstack(
        rx.match(
            TrusteeState.doc_kind,
            ("image", rx.image(src=TrusteeState.doc_src, id="receipt-document-image", max_width="100%",
                               max_height="60vh", object_fit="contain", alt=TrusteeState.open_name)),
            ("pdf", rx.el.iframe(src=TrusteeState.doc_src, id="receipt-document-pdf", title=TrusteeState.open_name,
                                 width="100%", height="60vh",
                                 style={"border": f"1px solid {rx.color('gray', 5)}", "border_radius": "6px"})),
            rx.text(TrusteeState.doc_note, id="receipt-document-note", size="2", color_scheme="gray"),
        ),
        rx.heading("Text the extraction read", size="2"),
        rx.cond(
            TrusteeState.doc_text != "",
            rx.box(rx.text(TrusteeState.doc_text, size="1", white_space="pre-wrap", font_family="monospace"),
                   id="receipt-text", max_height="20vh", overflow_y="auto", width="100%", padding="0.5em",
                   background_color=rx.color("gray", 2), border_radius="6px"),
            rx.text("Nothing read yet.", id="receipt-text-empty", size="2", color_scheme="gray"),
        ),
        flex="1 1 0", min_width="0", spacing="2",
    )


# --- the fields ---------------------------------------------------------------------------------


def _editable() -> rx.Var:
    return TrusteeState.can_edit & rx.Var.create(list(EDITABLE)).contains(TrusteeState.open_status)


def _vat_select(key: str) -> rx.Component:
    return rx.select.root(
        rx.select.trigger(placeholder="No VAT code", id=f"receipt-{key.replace('_', '-')}", width="100%"),
        rx.select.content(rx.foreach(TrusteeState.vat_codes,
                                     lambda c: rx.select.item(c["label"], value=c["value"]))),
        value=TrusteeState.field_values[key],
        on_change=lambda value: TrusteeState.set_field(key, value),
        disabled=~_editable(),
    )


def _field(key: str, label: str, kind: str) -> rx.Component:
    low = TrusteeState.field_low[key]
    control = _vat_select(key) if kind == "vat" else rx.input(
        value=TrusteeState.field_values[key],
        on_change=lambda value: TrusteeState.set_field(key, value),
        id=f"receipt-{key.replace('_', '-').removeprefix('receipt-')}",
        type=kind, step="0.01" if kind == "number" else None, read_only=~_editable(), width="100%",
        color_scheme=rx.cond(low, "amber", "gray"), variant=rx.cond(low, "soft", "surface"),
    )
    return rx.hstack(
        rx.text(label, size="2", width="7.5em", flex_shrink="0"),
        rx.box(control, flex="1", min_width="0"),
        rx.cond(
            TrusteeState.field_confidence[key] != "",
            rx.badge(TrusteeState.field_confidence[key], color_scheme=rx.cond(low, "amber", "gray"),
                     variant=rx.cond(low, "solid", "soft"), class_name=rx.cond(low, "confidence low", "confidence"),
                     title=rx.cond(low, "Low confidence: check this field against the document.",
                                   "How sure the extraction was"),
                     width="3.75em", justify_content="center"),
            rx.box(width="3.75em"),
        ),
        width="100%", align="center", spacing="2",
    )


def fields_pane() -> rx.Component:
    """The receipt's fields (editable while draft or checked) with their confidence, and Checked."""
    return rx.vstack(
        *[_field(key, label, kind) for key, label, kind in FIELDS],
        rx.hstack(
            rx.cond(_editable(), rx.button(rx.icon("save", size=14), "Save", variant="soft",
                                           on_click=TrusteeState.save_fields, id="receipt-save")),
            rx.cond(TrusteeState.can_check & (TrusteeState.open_status == "draft"),
                    rx.button(rx.icon("check-check", size=14), "Checked", on_click=TrusteeState.check,
                              id="receipt-check")),
            rx.cond(TrusteeState.open_checked_by != "",
                    rx.text("Checked by ", TrusteeState.open_checked_by, size="2", color_scheme="gray",
                            id="receipt-checked-by")),
            spacing="2", align="center", wrap="wrap",
        ),
        width="100%", spacing="2",
    )


# --- the booking lines --------------------------------------------------------------------------


def _line_input(key: str, width: str, datalist: str | None = None) -> rx.Component:
    return rx.input(value=TrusteeState.line_values[key], on_change=lambda v: TrusteeState.set_line_value(key, v),
                    id=f"line-{key.replace('_', '-')}", size="1", width=width,
                    list=datalist)


def _editing_row(line: PositionRow) -> rx.Component:
    return rx.table.row(
        rx.table.cell(_line_input("debit_account", "5.5em", "trustee-accounts")),
        rx.table.cell(_line_input("credit_account", "5.5em", "trustee-accounts")),
        rx.table.cell(_line_input("amount", "6em")),
        rx.table.cell(rx.hstack(_line_input("vat_code", "5em", "trustee-vat-codes"), _line_input("vat_amount", "5em"),
                                spacing="1")),
        rx.table.cell(_line_input("text", "100%"), col_span=2),
        rx.table.cell(status_badge(line["status"], "position-status")),
        rx.table.cell(rx.hstack(
            rx.icon_button(rx.icon("check", size=12), size="1", on_click=TrusteeState.save_line,
                           class_name="position-save", title="Save"),
            rx.icon_button(rx.icon("x", size=12), size="1", variant="soft", on_click=TrusteeState.cancel_line,
                           title="Cancel"),
            spacing="1")),
        class_name="position-row editing",
    )


def _line_actions(line: PositionRow) -> rx.Component:
    """Accept and Reject for a proposed line; Edit while it is proposed or accepted (not yet booked)."""
    proposed = line["status"] == "proposed"
    return rx.cond(
        TrusteeState.can_decide,
        rx.hstack(
            rx.cond(proposed, rx.button("Accept", size="1", color_scheme="green", class_name="position-accept",
                                        on_click=TrusteeState.accept_line(line["id"]))),
            rx.cond(proposed, rx.button("Reject", size="1", color_scheme="red", variant="soft",
                                        class_name="position-reject", on_click=TrusteeState.reject_line(line["id"]))),
            rx.cond(proposed | (line["status"] == "accepted"),
                    rx.icon_button(rx.icon("pencil", size=12), size="1", variant="ghost", class_name="position-edit",
                                   title="Edit", on_click=TrusteeState.edit_line(line["id"]))),
            spacing="1",
        ),
    )


def _line_row(line: PositionRow) -> rx.Component:
    return rx.cond(
        TrusteeState.line_edit_id == line["id"],
        _editing_row(line),
        rx.table.row(
            rx.table.cell(line["debit"], class_name="position-debit"),
            rx.table.cell(line["credit"], class_name="position-credit"),
            rx.table.cell(line["amount"], class_name="position-amount", text_align="right"),
            rx.table.cell(rx.cond(line["vat_code"] != "", rx.text(line["vat_code"], " · ", line["vat_amount"]), ""),
                          class_name="position-vat", white_space="nowrap"),
            rx.table.cell(line["text"], class_name="position-text"),
            rx.table.cell(rx.text(line["reason"], size="1", color_scheme="gray"), class_name="position-reason",
                          title=line["source"]),
            rx.table.cell(status_badge(line["status"], "position-status")),
            rx.table.cell(_line_actions(line)),
            class_name="position-row",
        ),
    )


def _datalists() -> rx.Component:
    """Suggestions for the account and VAT code inputs of a line being edited."""
    def option(choice: Choice) -> rx.Component:
        return rx.el.option(choice["label"], value=choice["value"])

    return rx.fragment(rx.el.datalist(rx.foreach(TrusteeState.accounts, option), id="trustee-accounts"),
                       rx.el.datalist(rx.foreach(TrusteeState.vat_codes, option), id="trustee-vat-codes"))


def _book_bar() -> rx.Component:
    blocked = TrusteeState.book_reason != ""
    return rx.hstack(
        rx.text("Accepted ", rx.text.strong(TrusteeState.accepted_sum), " of ",
                rx.text.strong(TrusteeState.open_total, " ", TrusteeState.open_currency), size="2",
                id="booking-balance"),
        rx.spacer(),
        rx.cond(blocked, rx.text(TrusteeState.book_reason, size="2", color_scheme="gray", id="book-reason")),
        rx.cond(TrusteeState.may_book & rx.Var.create(list(EDITABLE)).contains(TrusteeState.open_status),
                rx.button(rx.icon("book-check", size=14), "Book", on_click=TrusteeState.book, id="receipt-book",
                          disabled=blocked, title=TrusteeState.book_reason)),
        width="100%", align="center", spacing="3", wrap="wrap",
    )


def lines_pane() -> rx.Component:
    """The proposed booking lines, accepted or rejected one by one, editable, and Book."""
    return rx.vstack(
        rx.hstack(
            rx.heading("Booking lines", size="3"),
            rx.spacer(),
            rx.cond(TrusteeState.can_propose & rx.Var.create(list(EDITABLE)).contains(TrusteeState.open_status),
                    rx.button(rx.icon("sparkles", size=14), "Propose bookings", variant="soft",
                              on_click=TrusteeState.propose, id="receipt-propose")),
            width="100%", align="center",
        ),
        rx.cond(
            TrusteeState.lines.length() > 0,
            rx.table.root(
                rx.table.header(rx.table.row(*[rx.table.column_header_cell(h) for h in (
                    "Debit", "Credit", "Amount", "VAT code", "Text", "Why", "Status", "")])),
                rx.table.body(rx.foreach(TrusteeState.lines, _line_row)),
                id="position-list", width="100%", size="1",
            ),
            rx.text(rx.cond(TrusteeState.can_propose, "No lines yet: check the fields, then propose bookings.",
                            "No booking lines yet."), size="2", color_scheme="gray", id="position-list-empty"),
        ),
        _datalists(),
        _book_bar(),
        width="100%", spacing="2",
    )


def review_panel() -> rx.Component:
    """The open receipt: document on the left, fields and lines on the right."""
    return rx.vstack(
        rx.hstack(
            rx.icon_button(rx.icon("arrow-left", size=14), size="1", variant="soft", title="Back to the receipts",
                           on_click=TrusteeState.close_receipt, id="receipt-close"),
            rx.heading(TrusteeState.open_name, size="4", id="receipt-heading", **{"word_break": "break-all"}),
            status_badge(TrusteeState.open_status, "receipt-open-status"),
            width="100%", align="center", spacing="3",
        ),
        rx.cond(
            (TrusteeState.open_extraction_status == "failed") | (TrusteeState.open_extraction_status == "not_receipt"),
            rx.callout(rx.text(rx.cond(TrusteeState.open_extraction_status == "not_receipt", "Not a receipt: ",
                                       "The extraction failed: "), TrusteeState.open_extraction_message),
                       icon="file-warning", color_scheme="orange", id="receipt-extraction-message", width="100%"),
        ),
        rx.flex(
            document_pane(),
            rx.box(fields_pane(), flex="1 1 0", min_width="0"),
            width="100%", spacing="5", direction=rx.breakpoints(initial="column", md="row"),
        ),
        rx.divider(),
        lines_pane(),
        width="100%", spacing="3", id="receipt-review",
    )
