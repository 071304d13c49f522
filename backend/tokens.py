"""The door to a user's personal API tokens (the API tokens page and /api/me/tokens).

Any signed-in user may list, create and revoke their own tokens and no one else's; another
user's token is "not found", exactly like a missing one (``backend.auth`` keeps the rows).
"""

from __future__ import annotations

from backend import auth
from backend.db.models import AuthToken, FeatureInstance
from backend.rbac.access import AccessContext
from backend.rbac.door import Door, guarded


class ApiTokens(Door):
    """The signed-in user's own personal API tokens."""

    def __init__(self, access: AccessContext):
        self.access = access

    @guarded("authenticated")
    def list(self) -> list[AuthToken]:
        """The user's tokens that are not revoked, newest first (names and dates only)."""
        return auth.list_api_tokens(self.access.session, self.access.user)

    @guarded("authenticated")
    def create(self, name: str, instance_id: str | None = None, read_only: bool = False) -> tuple[AuthToken, str]:
        """A new named token and its text, shown once (only its hash is kept).

        `instance_id` narrows it to one feature instance the user may open (NotFound for any
        other, like a missing one); `read_only` limits it to read tools at /mcp.
        """
        if instance_id is not None:
            instance_id = self.access.require_instance(instance_id).id
        return auth.create_api_token(self.access.session, self.access.user, name, instance_id, read_only)

    @guarded("authenticated")
    def instances(self) -> list[FeatureInstance]:
        """The feature instances a token may be narrowed to: those the user may open."""
        return self.access.visible_instances()

    @guarded("authenticated")
    def revoke(self, token_id: str) -> None:
        """Revoke one of the user's tokens; NotFound for anybody else's."""
        auth.revoke_api_token(self.access.session, self.access.user, token_id)
