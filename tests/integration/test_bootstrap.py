"""First start: migrations, the system administrator, the default mandate and its instances."""

from __future__ import annotations

import re
import stat

import pytest
from sqlmodel import select

from backend import bootstrap
from backend.auth import LoginFailed, login
from backend.config import get_settings, reset_settings_cache
from backend.db import reset_engine, session_scope
from backend.db.models import FeatureInstance, Mandate, Role, User
from backend.features.registry import get_features
from backend.tenancy import instance_role_labels


@pytest.fixture
def fresh_config(db_url, tmp_path, monkeypatch):
    monkeypatch.setenv("POWERON_DB_URL", db_url)
    monkeypatch.setenv("POWERON_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("POWERON_ADMIN_PASSWORD", raising=False)
    monkeypatch.delenv("POWERON_ADMIN_USER", raising=False)
    monkeypatch.delenv("POWERON_SECRET_KEY", raising=False)
    reset_settings_cache()
    reset_engine()
    yield tmp_path / "data"
    reset_engine()
    reset_settings_cache()


def test_first_start_prints_a_generated_password_once_and_it_works(fresh_config, capsys):
    bootstrap.main()
    first = capsys.readouterr().out
    password = re.search(r"password: (\S+)", first).group(1)
    assert "username: admin" in first
    bootstrap.main()
    second = capsys.readouterr().out
    assert password not in second and "up to date" in second
    with session_scope() as session:
        assert login(session, "admin", password, client_address="127.0.0.1").token.startswith("pon_")
        admin = session.exec(select(User).where(User.username == "admin")).one()
        assert admin.is_sysadmin and admin.password_hash and password not in admin.password_hash


def test_default_mandate_instances_and_admin_roles(fresh_config):
    bootstrap.prepare()
    bootstrap.prepare()  # idempotent
    with session_scope() as session:
        mandates = session.exec(select(Mandate)).all()
        assert [m.name for m in mandates] == ["Default"]
        instances = {i.feature_code: i for i in session.exec(select(FeatureInstance)).all()}
        assert {code: i.label for code, i in instances.items()} == {
            "workspace": "Workspace", "graphicalEditor": "Graphical Editor"}
        admin = session.exec(select(User).where(User.username == "admin")).one()
        assert instance_role_labels(session, admin, instances["workspace"].id) == ["workspace-admin"]
        assert instance_role_labels(session, admin, instances["graphicalEditor"].id) == ["graphicalEditor-admin"]
        templates = session.exec(select(Role).where(Role.mandate_id.is_(None))).all()
        system = sorted(r.role_label for r in templates if r.is_system_role)
        assert system == ["admin", "user", "viewer"]
        feature = sorted(r.role_label for r in templates if not r.is_system_role)
        assert feature == sorted(f"{c}-{s}" for c in get_features()  # every feature's standard templates
                                 for s in ("admin", "user", "viewer"))
        copies = session.exec(select(Role).where(Role.mandate_id == mandates[0].id)).all()
        assert sorted(r.role_label for r in copies if r.feature_instance_id is None) == system
        assert all(not r.is_system_role for r in copies)


def test_configured_admin_and_secret_key(fresh_config, monkeypatch):
    monkeypatch.setenv("POWERON_ADMIN_USER", "root")
    monkeypatch.setenv("POWERON_ADMIN_PASSWORD", "configured-pw")
    reset_settings_cache()
    result = bootstrap.prepare()
    assert result.admin_created and result.generated_password is None
    with session_scope() as session:
        assert login(session, "root", "configured-pw", client_address="127.0.0.1").user_id
        with pytest.raises(LoginFailed):
            login(session, "admin", "configured-pw", client_address="127.0.0.1")
    key_file = fresh_config / "secret.key"
    assert key_file.exists() and stat.S_IMODE(key_file.stat().st_mode) == 0o600
    key = get_settings().secret_key
    reset_settings_cache()
    assert get_settings().secret_key == key
