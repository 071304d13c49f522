"""Toolbox trustee (spec §5.2): receipts to bookings, through the door of a Trustee instance.

- `trustee.extract`: receipt files (PDF or image; e.g. an e-mail step's `files`, or a receipt
  already uploaded) → receipts with their fields, a confidence per field and the text read;
- `trustee.process`: booking proposals for a receipt (rules learned from the supplier's earlier
  bookings first, then the AI model); with `book` the receipt is checked, its proposals accepted and
  it is booked — refused with the reason when the lines do not balance or the period is closed;
- `trustee.syncAccounting`: booked receipts to Bexio through a `bexio` connection (never twice), and/or
  the journal as a CSV or XLSX file.

Each is an agent tool and a graph node. They work on the Trustee instance `trusteeInstanceId`
(default: the caller's instance when that is a Trustee), authorised as the caller — the run's user in
a workflow of a Graphical Editor — through the Trustee's door: a foreign or unknown instance is
"not found".
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from backend.actions.base import ActionContext, ActionError, ActionParams, action
from backend.db.models import FeatureInstance
from backend.errors import FieldError, InvalidInput, NotFound
from backend.features.trustee.interface import TrusteeInterface, open_interface
from backend.features.trustee.main import FEATURE_CODE
from backend.files import service as files
from backend.statemachines import ConcurrentTransition, IllegalTransition

TOOLBOX = "trustee"
INSTANCE_HELP = ("Id of the Trustee instance (default: this instance when it is a Trustee, else the only Trustee "
                 "instance of the mandate the caller may open)")
TEXT_CHARS = 4_000


class _Output(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class _TrusteeParams(ActionParams):
    trustee_instance_id: str | None = Field(None, max_length=64, description=INSTANCE_HELP)


def trustee_door(context: ActionContext, instance_id: str | None) -> TrusteeInterface:
    """The Trustee door of `instance_id` (or the context's instance) for the caller; NotFound otherwise."""
    chosen = (instance_id or "").strip() or None
    if chosen is None:
        current = context.session.get(FeatureInstance, context.feature_instance_id) \
            if context.feature_instance_id else None
        if current is not None and current.feature_code == FEATURE_CODE:
            chosen = current.id
        else:
            mine = [i for i in context.access.visible_instances(FEATURE_CODE) if i.mandate_id == context.mandate_id]
            if len(mine) != 1:
                raise InvalidInput([FieldError("trusteeInstanceId", (
                    "name the Trustee instance to work in: this step does not run in one, and you may open "
                    f"{len(mine)} Trustee instances in this mandate"))])
            chosen = mine[0].id
    door = open_interface(context.access, chosen)
    if door.instance.mandate_id != context.mandate_id:
        raise NotFound(f"feature instance {chosen} not found")
    return door


def _receipt_dict(door: TrusteeInterface, receipt_id: str) -> dict[str, Any]:
    detail = door.get_receipt(receipt_id)
    found = asdict(detail.receipt)
    text = detail.text
    found["text"] = text if len(text) <= TEXT_CHARS else text[:TEXT_CHARS] + f"… [{len(text):,} characters]"
    found["lines"] = [asdict(p) for p in detail.lines]
    return found


# --- extract ----------------------------------------------------------------------------------------


class ExtractParams(_TrusteeParams):
    files: list[str] = Field([], max_length=20,
                             description="Paths of receipt files (PDF or image) in this instance's file store, "
                                         "e.g. an e-mail step's `files`; each becomes a receipt of the Trustee")
    receipt_id: str | None = Field(None, max_length=64, description="Read an uploaded draft receipt again instead")
    model: str | None = Field(None, description="Model id; default: the configured one.")


class ExtractOutput(_Output):
    trustee_instance_id: str
    count: int
    receipts: list[dict[str, Any]] = Field(description="Each receipt with its fields, extractionStatus "
                                                       "(done, failed, not_receipt), confidence and text")
    receipt: dict[str, Any] | None = Field(None, description="The first of them")


@action("trustee.extract", toolbox=TOOLBOX, label="Extract receipt",
        description="Read receipts (PDF or image files, or an uploaded receipt) with the AI model: supplier, date, "
                    "total, currency, VAT, description and lines, a confidence per field and the text read. A file "
                    "that is no receipt is reported as not_receipt, an unreadable one as failed with the reason.",
        params=ExtractParams, output=ExtractOutput, agent_tool=True, graph_node=True,
        capabilities=("read", "write"), needs=("ai",))
def extract(params: ExtractParams, context: ActionContext) -> ExtractOutput:
    door = trustee_door(context, params.trustee_instance_id)
    if bool(params.files) == bool(params.receipt_id):
        raise InvalidInput([FieldError("files", "give either files to read or the receiptId of an uploaded receipt")])
    ids = []
    if params.receipt_id:
        ids.append(params.receipt_id)
    for index, path in enumerate(params.files):
        if not isinstance(path, str) or not path.strip():
            raise InvalidInput([FieldError(f"files[{index}]", "must be the path of a file, e.g. /mail/receipt.pdf")])
        entry, data = files.read_bytes(context, path.strip())
        ids.append(door.upload_receipt(data, entry.name, entry.mime_type).id)
    found = []
    for receipt_id in ids:
        door.extract_receipt(receipt_id, params.model)
        found.append(_receipt_dict(door, receipt_id))
    return ExtractOutput(trustee_instance_id=door.instance.id, count=len(found), receipts=found,
                         receipt=found[0] if found else None)


# --- process ----------------------------------------------------------------------------------------


class ProcessParams(_TrusteeParams):
    receipt_id: str = Field(min_length=1, max_length=64, description="The receipt to book (from trustee.extract)")
    changes: dict[str, Any] | None = Field(None, description="Corrections of the receipt's fields first (supplier, "
                                                             "receiptDate, total, currency, vatAmount, vatCode, "
                                                             "description)")
    book: bool = Field(False, description="Check the receipt, accept its proposals and book it; without it only "
                                          "the proposals are made")
    model: str | None = Field(None, description="Model id; default: the configured one.")


class ProcessOutput(_Output):
    trustee_instance_id: str
    receipt: dict[str, Any]
    positions: list[dict[str, Any]] = Field(description="The booking lines (debit/credit account, amount, VAT, "
                                                        "source rule|model, reason)")
    warnings: list[str]
    booked: bool


@action("trustee.process", toolbox=TOOLBOX, label="Book receipt",
        description="Propose the booking lines of a receipt (account learned from the supplier's earlier bookings, "
                    "else chosen by the AI model among the chart's accounts; expense and input tax against "
                    "Kreditoren 2000; VAT checked) and, with book, book it. Unbalanced lines, a VAT that does not "
                    "fit and a closed period are refused with the reason.",
        params=ProcessParams, output=ProcessOutput, agent_tool=True, graph_node=True,
        capabilities=("read", "write"), needs=("ai",))
def process(params: ProcessParams, context: ActionContext) -> ProcessOutput:
    door = trustee_door(context, params.trustee_instance_id)
    try:
        if params.changes:
            door.update_receipt(params.receipt_id, params.changes)
        detail = door.get_receipt(params.receipt_id)
        warnings: list[str] = []
        if detail.receipt.status in ("draft", "checked"):
            open_lines = [p for p in detail.lines if p.status in ("proposed", "accepted")]
            if not params.book or not open_lines:
                _, warnings = door.propose_lines(params.receipt_id, params.model)
            if params.book:
                if door.get_receipt(params.receipt_id).receipt.status == "draft":
                    door.check_receipt(params.receipt_id)
                for line in door.get_receipt(params.receipt_id).lines:
                    if line.status == "proposed":
                        door.accept_position(line.id)
                door.book_receipt(params.receipt_id)
        elif params.book is False:
            raise ActionError(f"receipt {params.receipt_id} is {detail.receipt.status} already")
    except (IllegalTransition, ConcurrentTransition) as exc:
        raise ActionError(str(exc)) from None
    found = _receipt_dict(door, params.receipt_id)
    return ProcessOutput(trustee_instance_id=door.instance.id, receipt=found, positions=found.pop("lines"),
                         warnings=warnings, booked=found["status"] in ("booked", "synced"))


# --- syncAccounting -----------------------------------------------------------------------------------


class SyncParams(_TrusteeParams):
    connection_id: str | None = Field(None, max_length=64, description="Id of the Bexio connection to send the "
                                                                       "booked receipts through (none: no sync)")
    export_format: Literal["none", "csv", "xlsx"] = Field("none", description="Also save the journal as a file")
    export_folder: str = Field("/exports", max_length=500, description="Folder of this instance's file store for "
                                                                       "the export")


class SyncOutput(_Output):
    trustee_instance_id: str
    synced: int
    failed: list[dict[str, str]]
    message: str
    export_path: str | None = None
    export_file_id: str | None = None


@action("trustee.syncAccounting", toolbox=TOOLBOX, label="Sync to accounting",
        description="Send the booked receipts of a Trustee instance to Bexio (connectionId of a bexio connection) "
                    "as manual entries, never twice; and/or save the journal as a CSV or XLSX file.",
        params=SyncParams, output=SyncOutput, agent_tool=True, graph_node=True,
        capabilities=("read", "write", "externalSend"))
def sync_accounting(params: SyncParams, context: ActionContext) -> SyncOutput:
    door = trustee_door(context, params.trustee_instance_id)
    if not params.connection_id and params.export_format == "none":
        raise InvalidInput([FieldError("connectionId", "give a Bexio connection to sync, an exportFormat, or both")])
    output = SyncOutput(trustee_instance_id=door.instance.id, synced=0, failed=[], message="")
    if params.connection_id:
        result = door.sync(params.connection_id)
        if result.failed and not result.synced:
            raise ActionError(result.message)
        output.synced, output.message = result.synced, result.message
        output.failed = [{"receiptId": r, "message": m} for r, m in result.failed]
    if params.export_format != "none":
        name, mime, data = door.export_journal(params.export_format)
        path = f"{params.export_folder.rstrip('/')}/{name}"
        if context.feature_instance_id and context.feature_instance_id != door.instance.id:
            entry = files.store_file(context, path, data, mime)
        else:
            entry = door.files.store_file(path, data, mime)
        output.export_path, output.export_file_id = entry.path, entry.id
        output.message = (output.message + "; " if output.message else "") + f"journal saved as {entry.path}"
    return output
