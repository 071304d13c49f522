"""Feature definition of the Trustee (bookkeeping: receipts, booking lines, journal, accounting sync)."""

import sys

from backend.features.data_access import PLATFORM_TABLES, DataTable
from backend.features.registry import FeatureCatalog, FeatureDefinition, definition_from_module
from backend.features.trustee.models import TrusteeAccount, TrusteePosition, TrusteeReceipt, TrusteeVatCode
from backend.rbac.templates import standard_feature_roles

FEATURE_CODE = "trustee"
LABEL = "Trustee"
ICON = "receipt"

# Permission items: the one place each is spelled (see backend/rbac/door.py).
OPEN = "ui.feature.trustee"
RECEIPTS_PAGE = "ui.feature.trustee.receipts"
UPLOAD_BUTTON = "ui.feature.trustee.receipts.upload"
REVIEW_PAGE = "ui.feature.trustee.review"
BOOK_BUTTON = "ui.feature.trustee.review.book"
JOURNAL_PAGE = "ui.feature.trustee.journal"
SYNC_BUTTON = "ui.feature.trustee.journal.sync"
ACCOUNTS_PAGE = "ui.feature.trustee.accounts"
ACCOUNTS_EDIT = "ui.feature.trustee.accounts.edit"
BOOK = "resource.feature.trustee.book"
SYNC = "resource.feature.trustee.sync"
MANAGE_ACCOUNTS = "resource.feature.trustee.manageAccounts"
MANAGE_ACCESS = "resource.feature.trustee.manageAccess"
RECEIPT_DATA = "data.feature.trustee.receipt"
POSITION_DATA = "data.feature.trustee.position"
ACCOUNT_DATA = "data.feature.trustee.account"
VAT_DATA = "data.feature.trustee.vat_code"
FILE_DATA = "data.feature.trustee.file"

UI_OBJECTS = (
    (OPEN, "Open the Trustee instance"),
    (RECEIPTS_PAGE, "Receipts inbox"),
    (UPLOAD_BUTTON, "Upload receipts button"),
    (REVIEW_PAGE, "Review a receipt"),
    (BOOK_BUTTON, "Book button"),
    (JOURNAL_PAGE, "Journal page"),
    (SYNC_BUTTON, "Export and sync buttons"),
    (ACCOUNTS_PAGE, "Chart of accounts"),
    (ACCOUNTS_EDIT, "Edit the chart of accounts"),
)
RESOURCE_OBJECTS = (
    (BOOK, "Book checked receipts"),
    (SYNC, "Send booked receipts to the accounting system"),
    (MANAGE_ACCOUNTS, "Edit the chart of accounts"),
    (MANAGE_ACCESS, "Grant and revoke access to the instance"),
)
DATA_ITEMS = (RECEIPT_DATA, POSITION_DATA, ACCOUNT_DATA, VAT_DATA, FILE_DATA)
DATA_TABLES = tuple(item.rsplit(".", 1)[-1] for item in DATA_ITEMS)
MODIFYING_UI_OBJECTS = (UPLOAD_BUTTON, BOOK_BUTTON, SYNC_BUTTON, ACCOUNTS_EDIT)
TEMPLATE_ROLES = standard_feature_roles(FEATURE_CODE, MODIFYING_UI_OBJECTS)
REQUIRED_SERVICES = ("database", "ai")

_MONEY = "amount in CHF (or the receipt's currency), 2 decimals"

# How a Feature Data Agent (spec §5.4) reads the tables (backend/features/data_access.py).
DATA_TABLE_SPECS = {
    "receipt": DataTable(
        "receipt", TrusteeReceipt,
        "Receipts (Belege): one per uploaded invoice or till slip, with what was read from it and its status.",
        notes={"file_id": "the receipt's file in the file store (file.id)", "file_name": "name of the uploaded file",
               "supplier": "who issued the receipt", "receipt_date": "date on the receipt (YYYY-MM-DD)",
               "total": f"gross total incl. VAT, {_MONEY}", "currency": "ISO currency code, usually CHF",
               "vat_amount": f"VAT contained in the total, {_MONEY}",
               "vat_code": "VAT code (see vat_code.code), e.g. VM81 = input tax 8.1 %",
               "description": "what was bought",
               "status": "draft (uploaded), checked (reviewed), booked (in the journal) or synced (sent to the "
                         "accounting system)",
               "extraction_status": "pending, done, failed or not_receipt", "extraction_message": "why it failed",
               "confidence": "the extraction's confidence per field (0..1)",
               "extracted_text": "the text read from the document", "extracted_lines": "line items read",
               "checked_by": "id of the user who checked it", "checked_at": "when it was checked",
               "booked_at": "when it was booked", "synced_at": "when it was sent to the accounting system",
               "external_id": "its id in the accounting system (e.g. Bexio) after the sync"},
    ),
    "position": DataTable(
        "position", TrusteePosition,
        "Booking lines (Positionen, journal entries): debit account, credit account and amount for a receipt. "
        "Expenses are the lines whose debit_account is an expense account (4000–6999); only status booked "
        "or synced are in the books.",
        default_order=("booking_date", True),
        notes={"receipt_id": "the receipt (receipt.id)", "booking_date": "booking date (YYYY-MM-DD)",
               "debit_account": "debit account number (Soll), e.g. 6640 = Reisespesen (travel)",
               "credit_account": "credit account number (Haben), e.g. 2000 = Kreditoren, 1020 = Bank",
               "amount": f"{_MONEY}; net of VAT on expense lines", "vat_code": "VAT code of the line",
               "vat_amount": f"VAT of the line, {_MONEY}", "text": "booking text",
               "status": "proposed, accepted, rejected, booked or synced",
               "source": "rule (learned from earlier bookings), model (AI proposal) or manual",
               "reason": "why this account was proposed"},
    ),
    "account": DataTable(
        "account", TrusteeAccount, "The instance's chart of accounts (Swiss SME chart, KMU-Kontenrahmen).",
        default_order=("number", False),
        notes={"number": "account number, e.g. 6640", "name": "account name, e.g. Reisespesen (travel expenses)",
               "kind": "asset, liability, equity, revenue or expense"},
    ),
    "vat_code": DataTable(
        "vat_code", TrusteeVatCode, "VAT codes with their Swiss rates (8.1 % normal, 2.6 % reduced, 3.8 % "
                                    "accommodation, 0 % exempt).",
        default_order=("code", False),
        notes={"code": "the code, e.g. VM81", "rate": "rate in percent, e.g. 8.1",
               "account": "account the VAT is booked on (1170/1171 input tax, 2200 VAT owed)"},
    ),
    "file": PLATFORM_TABLES["file"],
}


def get_feature_definition() -> FeatureDefinition:
    """Catalogue metadata of this feature."""
    return definition_from_module(sys.modules[__name__])


def register_feature(catalog: FeatureCatalog) -> None:
    """Add this feature to the catalogue."""
    catalog.register(get_feature_definition())
