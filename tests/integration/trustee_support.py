"""Shared helpers of the Trustee tests: a Trustee instance with users, receipt PDFs, scripted answers."""

from __future__ import annotations

from dataclasses import dataclass

from fpdf import FPDF
from sqlmodel import select

from backend.auth import hash_password
from backend.db import session_scope
from backend.db.models import Mandate, User
from backend.tenancy import create_feature_instance, create_mandate, grant_instance_roles, grant_mandate_roles

PASSWORD = "trustee-pass-123"


def receipt_pdf(*lines: str) -> bytes:
    """A small PDF with a text layer (fpdf2), one text line per argument."""
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", size=12)
    for line in lines:
        pdf.cell(0, 8, line, new_x="LMARGIN", new_y="NEXT")
    return bytes(pdf.output())


def scanned_pdf() -> bytes:
    """A PDF without any text (a page with a drawn rectangle only): what a scanner without OCR makes."""
    pdf = FPDF()
    pdf.add_page()
    pdf.rect(20, 20, 100, 60, style="F")
    return bytes(pdf.output())


SBB = receipt_pdf("SBB CFF FFS", "Billett Zuerich HB - Bern", "Datum: 12.08.2025",
                  "Total CHF 108.10", "inkl. MWST 8.1% CHF 8.10")


def extraction(supplier: str = "SBB", day: str = "2025-08-12", total: float = 108.10, vat: float | None = 8.10,
               rate: float | None = 8.1, description: str = "Train ticket Zurich - Bern") -> dict:
    """The model's JSON answer for a receipt."""
    return {"isReceipt": True, "readable": True, "reason": "", "supplier": supplier, "date": day, "total": total,
            "currency": "CHF", "vatAmount": vat, "vatRate": rate, "description": description,
            "lines": [{"text": description, "amount": total, "vatRate": rate}],
            "confidence": {"supplier": 0.98, "date": 0.95, "total": 0.99, "currency": 0.9, "vatAmount": 0.9,
                           "vatRate": 0.85, "description": 0.7}}


@dataclass
class TrusteeWorld:
    mandate_id: str
    instance_id: str
    foreign_instance_id: str
    editor_id: str


def make_world() -> TrusteeWorld:
    """A Trustee instance in the default mandate (admin: trustee-admin; vera: viewer; nora: no access),
    and one in another mandate."""
    from backend.db.models import FeatureInstance

    with session_scope() as session:
        mandate = session.exec(select(Mandate).where(Mandate.name == "Default")).first() or \
            session.exec(select(Mandate)).first()
        admin = session.exec(select(User).where(User.username == "admin")).one()
        instance = create_feature_instance(session, mandate, "trustee", "Trustee Buchhaltung")
        grant_instance_roles(session, admin, instance, ["trustee-admin"])
        for name, roles in (("vera", ["trustee-viewer"]), ("nora", None), ("ulla", ["trustee-user"])):
            user = User(username=name, password_hash=hash_password(PASSWORD), display_name=name.title())
            session.add(user)
            session.flush()
            grant_mandate_roles(session, user, mandate, ["user"])
            if roles:
                grant_instance_roles(session, user, instance, roles)
        other = create_mandate(session, "Other-Corp")
        foreign = create_feature_instance(session, other, "trustee", "Foreign Trustee")
        editor = session.exec(select(FeatureInstance).where(FeatureInstance.mandate_id == mandate.id,
                                                            FeatureInstance.feature_code == "graphicalEditor")).one()
        return TrusteeWorld(mandate.id, instance.id, foreign.id, editor.id)
