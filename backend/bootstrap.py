"""First start: schema, template roles, the system administrator and the default mandate.

Run as `python -m backend.bootstrap` (make run does); every step is idempotent.
"""

from __future__ import annotations

import logging
import secrets
import sys
from dataclasses import dataclass

from sqlmodel import Session, select

from backend.auth import hash_password
from backend.config import get_settings
from backend.db import migrate, session_scope
from backend.db.engine import schema_lock
from backend.db.models import Feature, FeatureInstance, Mandate, User
from backend.features.registry import get_features
from backend.rbac.templates import ensure_template_roles, sync_ui_objects
from backend.tenancy import create_feature_instance, create_mandate, grant_instance_roles, grant_mandate_roles

log = logging.getLogger(__name__)

DEFAULT_MANDATE = "Default"
DEFAULT_INSTANCES = (("workspace", "Workspace"), ("graphicalEditor", "Graphical Editor"))


@dataclass(frozen=True)
class BootstrapResult:
    """What the first start created; `generated_password` is shown once and never stored."""

    admin_created: bool
    generated_password: str | None
    mandate_created: bool


def _ensure_admin(session: Session) -> tuple[User, bool, str | None]:
    settings = get_settings()
    admin = session.exec(select(User).where(User.username == settings.admin_user)).first()
    if admin is not None:
        return admin, False, None
    generated = None if settings.admin_password else secrets.token_urlsafe(12)
    admin = User(
        username=settings.admin_user,
        display_name="System administrator",
        password_hash=hash_password(settings.admin_password or generated),
        is_sysadmin=True,
    )
    session.add(admin)
    session.flush()
    return admin, True, generated


def _ensure_default_mandate(session: Session, admin: User) -> bool:
    if session.exec(select(Mandate).where(Mandate.name == DEFAULT_MANDATE)).first():
        return False
    mandate = create_mandate(session, DEFAULT_MANDATE)
    grant_mandate_roles(session, admin, mandate, ["admin"])
    for code, label in DEFAULT_INSTANCES:
        instance: FeatureInstance = create_feature_instance(session, mandate, code, label)
        grant_instance_roles(session, admin, instance, [f"{code}-admin"])
    return True


def sync_catalog(session: Session) -> None:
    """Feature catalogue and template roles as the code declares them; new UI objects onto copies."""
    features = get_features()
    for feature in features.values():
        row = session.get(Feature, feature.code) or Feature(code=feature.code, label=feature.label)
        row.label, row.icon = feature.label, feature.icon
        session.add(row)
    ensure_template_roles(session, {code: f.template_roles for code, f in features.items()})
    sync_ui_objects(session)


def bootstrap(session: Session) -> BootstrapResult:
    """Sync the catalogue, then create whatever of the first-start objects is missing."""
    sync_catalog(session)
    admin, created, generated = _ensure_admin(session)
    mandate_created = _ensure_default_mandate(session, admin) if created else False
    return BootstrapResult(created, generated, mandate_created)


def prepare() -> BootstrapResult:
    """Apply migrations, then bootstrap (one process at a time on PostgreSQL)."""
    with schema_lock():
        migrate()
        with session_scope() as session:
            return bootstrap(session)


def main() -> None:
    """Entry point of `python -m backend.bootstrap`."""
    logging.basicConfig(level=logging.WARNING)
    result = prepare()
    settings = get_settings()
    if result.generated_password:
        # Printed once, to the console of the person starting PowerOn; never logged or stored.
        sys.stdout.write(
            "\n" + "=" * 60 + "\n"
            f"  PowerOn system administrator created\n"
            f"  username: {settings.admin_user}\n"
            f"  password: {result.generated_password}\n"
            "  (shown only this once: note it now)\n" + "=" * 60 + "\n\n"
        )
    elif result.admin_created:
        sys.stdout.write(f"PowerOn: system administrator '{settings.admin_user}' created.\n")
    else:
        sys.stdout.write("PowerOn: database up to date.\n")


if __name__ == "__main__":
    main()
