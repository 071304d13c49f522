"""The feature instance a user works in, per feature: what the page header names and switches.

A user may open several instances of a feature (a Graphical Editor in the Default mandate, one in
a customer's mandate …). Pages that show one of them (Workflows, Editor, Workspace, Monitor) ask
:class:`InstanceChoice` which one is current and which others the header may offer:

1. the one the page has chosen (the tab's own choice), while the user may still open it;
2. the one the user used last (``User.recent_instances[featureCode]``), while still visible;
3. the first instance of the feature in the bootstrap's "Default" mandate (oldest first: the
   bootstrap's own, never one an administrator added later);
4. the first visible one in a stable order (mandate name, then label).

A new, empty instance an administrator creates is therefore never opened silently.

Choosing one (switching in the header, opening a workflow in the editor) is remembered per user
and feature with :meth:`InstanceChoice.remember` on the door of that instance
(:meth:`InstanceChoice.of`): only the signed-in user's own row is written, and an instance the
user may not open is refused with NotFound, exactly like an id that does not exist.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlmodel import select

from backend.bootstrap import DEFAULT_MANDATE
from backend.db.models import FeatureInstance, Mandate
from backend.errors import NotFound
from backend.rbac.access import AccessContext
from backend.rbac.door import FEATURE_PLACEHOLDER, Door, FeatureItem, guarded
from backend.rbac.rights import UI

# Opening an instance of the door's feature (ui.feature.<featureCode>), as AccessContext checks it.
OPEN_INSTANCE = FeatureItem(f"ui.feature.{FEATURE_PLACEHOLDER}")


@dataclass(frozen=True)
class InstanceOption:
    """One instance a user may open, with its mandate's name (what the header lists)."""

    id: str
    label: str
    feature_code: str
    mandate_id: str
    mandate_name: str


@dataclass(frozen=True)
class CurrentInstance:
    """The instance a page shows (None: the user may open none) and every one it may offer."""

    chosen: InstanceOption | None
    options: list[InstanceOption]


def _sort_key(option: InstanceOption) -> tuple[str, str, str]:
    return option.mandate_name.casefold(), option.label.casefold(), option.id


class InstanceChoice(Door):
    """The instances of a feature one user may open, the current one, and remembering a choice.

    Built with an AccessContext alone it answers :meth:`options` and :meth:`current`; the door of
    one instance (:meth:`of`) also remembers that instance as the user's choice (:meth:`remember`).
    """

    def __init__(self, access: AccessContext, instance: FeatureInstance | None = None):
        self.access = access
        self.session = access.session
        self.user = access.user
        self.instance = instance

    @classmethod
    def of(cls, access: AccessContext, instance_id: str, feature_code: str | None = None) -> InstanceChoice:
        """The door of instance `instance_id` (of `feature_code` when given).

        Raises:
            NotFound: no such instance, another feature's, or one the user may not open.
        """
        return cls(access, access.require_instance(instance_id, feature_code))

    # --- reading --------------------------------------------------------------------------------

    def _visible(self, feature_code: str) -> list[tuple[FeatureInstance, InstanceOption]]:
        instances = self.access.visible_instances(feature_code)
        mandate_ids = {i.mandate_id for i in instances}
        names = dict(self.session.exec(select(Mandate.id, Mandate.name).where(Mandate.id.in_(mandate_ids))).all()
                     ) if mandate_ids else {}
        pairs = [(i, InstanceOption(id=i.id, label=i.label, feature_code=i.feature_code, mandate_id=i.mandate_id,
                                    mandate_name=names.get(i.mandate_id, ""))) for i in instances]
        return sorted(pairs, key=lambda pair: _sort_key(pair[1]))

    @guarded("authenticated")
    def options(self, feature_code: str) -> list[InstanceOption]:
        """Every instance of `feature_code` the user may open, by mandate name, then label."""
        return [option for _instance, option in self._visible(feature_code)]

    @guarded("authenticated")
    def current(self, feature_code: str, chosen_id: str = "") -> CurrentInstance:
        """The instance of `feature_code` a page shows, and the ones its header may offer.

        Args:
            feature_code: The feature (graphicalEditor, workspace …).
            chosen_id: The page's own choice; ignored when the user may not open it (any more).

        Returns:
            The chosen instance after the order in the module's docstring, and every option.
        """
        visible = self._visible(feature_code)
        options = [option for _instance, option in visible]
        by_id = {option.id: option for option in options}
        recent = (self.user.recent_instances or {}).get(feature_code, "")
        for wanted in (chosen_id, recent):
            if wanted and wanted in by_id:
                return CurrentInstance(by_id[wanted], options)
        defaults = sorted((i for i, option in visible if option.mandate_name == DEFAULT_MANDATE),
                          key=lambda i: (i.sys_created_at, i.id))
        if defaults:
            return CurrentInstance(by_id[defaults[0].id], options)
        return CurrentInstance(options[0] if options else None, options)

    # --- the user's choice ----------------------------------------------------------------------

    @guarded(UI, OPEN_INSTANCE)
    def remember(self) -> InstanceOption:
        """Remember this instance as the user's current one of its feature (their own row only).

        Returns:
            The instance as the header names it.
        """
        instance = self.instance
        if instance is None:  # only `of` builds a door with an instance
            raise NotFound("feature instance not found")
        recent = dict(self.user.recent_instances or {})
        if recent.get(instance.feature_code) != instance.id:
            recent[instance.feature_code] = instance.id
            self.user.recent_instances = recent  # a new dict: the JSON column sees the change
            self.session.add(self.user)
            self.session.flush()
        mandate = self.session.get(Mandate, instance.mandate_id)
        return InstanceOption(id=instance.id, label=instance.label, feature_code=instance.feature_code,
                              mandate_id=instance.mandate_id, mandate_name=mandate.name if mandate else "")


def choose_instance(access: AccessContext, instance_id: str, feature_code: str) -> InstanceOption:
    """Make instance `instance_id` of `feature_code` the user's current one (NotFound when they
    may not open it; nothing is written then)."""
    return InstanceChoice.of(access, instance_id, feature_code).remember()
