"""RBAC resolution of spec §4.3 on `backend.rbac.resolver.decide`, then its laws as properties.

The worked examples read as the spec does: instance beats mandate beats global (for DATA),
view is OR-ed across the roles of the highest level, and within a level the most specific item
wins (exact > prefix > generic, a longer prefix before a shorter). The hypothesis tests state
the same rules as laws over generated roles, rules and items. The last tests check the two
short-cuts of AccessResolver (system administrator, disabled account) on a real database.
"""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlmodel import Session

from backend.db.models import AccessRule, User
from backend.rbac.resolver import AccessResolver, Decision, HeldRole, Priority, decide
from backend.rbac.rights import (
    ALL_RIGHTS,
    CONTEXTS,
    DATA,
    NO_RIGHTS,
    OPERATIONS,
    RESOURCE,
    UI,
    Level,
    Rights,
    specificity,
)

GLOBAL, MANDATE, INSTANCE = Priority.GLOBAL, Priority.MANDATE, Priority.INSTANCE
ITEM = "data.feature.graphicalEditor.workflow"


def rule(role: str, context: str, item: str = "*", view: bool = False, read: str = "none",
         create: str = "none", update: str = "none", delete: str = "none") -> AccessRule:
    return AccessRule(role_id=role, context=context, item=item, view=view, read=read, create=create,
                      update=update, delete=delete)


def resolve(context: str, item: str, roles: dict[str, Priority], *rules: AccessRule) -> Decision:
    """decide() over roles {label: priority} (the label doubles as id) and their rules."""
    held = [HeldRole(label, label, priority) for label, priority in roles.items()]
    by_role: dict[str, list[AccessRule]] = {}
    for r in rules:
        by_role.setdefault(r.role_id, []).append(r)
    return decide(context, item, held, by_role)


def deciders(decision: Decision) -> set[tuple[str, str]]:
    return {(m.role_label, m.item) for m in decision.rules}


# --- worked examples ---------------------------------------------------------------------------


def test_instance_beats_mandate_beats_global_for_data():
    rules = (rule("template", DATA, read="all", create="all", update="all", delete="all"),
             rule("mandate-user", DATA, read="all", create="own"),
             rule("instance-viewer", DATA, ITEM, read="own"))
    everyone = {"template": GLOBAL, "mandate-user": MANDATE, "instance-viewer": INSTANCE}

    decision = resolve(DATA, ITEM, everyone, *rules)
    assert decision.priority == INSTANCE
    assert decision.rights == Rights(read=Level.OWN)
    assert deciders(decision) == {("instance-viewer", ITEM)}

    without_instance = {k: v for k, v in everyone.items() if v != INSTANCE}
    decision = resolve(DATA, ITEM, without_instance, *rules)
    assert decision.priority == MANDATE
    assert (decision.level("read"), decision.level("create"), decision.level("delete")) == (
        Level.ALL, Level.OWN, Level.NONE)

    decision = resolve(DATA, ITEM, {"template": GLOBAL}, *rules)
    assert decision.priority == GLOBAL and decision.rights.level("delete") == Level.ALL


def test_a_lower_level_is_ignored_once_a_higher_level_matches_even_if_more_permissive():
    decision = resolve(
        DATA, ITEM, {"mandate-admin": MANDATE, "instance-viewer": INSTANCE},
        rule("mandate-admin", DATA, read="all", create="all", update="all", delete="all"),
        rule("instance-viewer", DATA, "data.feature.graphicalEditor.*", read="all"),
    )
    assert decision.priority == INSTANCE
    assert decision.rights == Rights(read=Level.ALL)
    assert "instance" in decision.explain() and "instance-viewer" in decision.explain()


def test_a_higher_level_without_a_matching_rule_does_not_decide():
    decision = resolve(
        DATA, ITEM, {"mandate-user": MANDATE, "instance-role": INSTANCE},
        rule("mandate-user", DATA, read="all"),
        rule("instance-role", DATA, "data.feature.workspace.*", read="all", delete="all"),
    )
    assert decision.priority == MANDATE and decision.rights == Rights(read=Level.ALL)


def test_view_is_or_ed_across_the_roles_of_the_highest_level():
    item = "ui.feature.graphicalEditor.editor"
    decision = resolve(
        UI, item, {"a": INSTANCE, "b": INSTANCE, "c": MANDATE},
        rule("a", UI, "ui.feature.graphicalEditor.*", view=False),
        rule("b", UI, "ui.feature.graphicalEditor.*", view=True),
        rule("c", UI, item, view=False),
    )
    assert decision.allowed and decision.priority == INSTANCE
    assert deciders(decision) == {("a", "ui.feature.graphicalEditor.*"), ("b", "ui.feature.graphicalEditor.*")}


def test_data_operations_are_united_to_the_most_permissive_within_the_deciding_level():
    decision = resolve(
        DATA, ITEM, {"a": INSTANCE, "b": INSTANCE},
        rule("a", DATA, ITEM, read="all", update="own"),
        rule("b", DATA, ITEM, read="own", create="all", update="none", delete="own"),
    )
    assert decision.rights == Rights(False, Level.ALL, Level.ALL, Level.OWN, Level.OWN)


def test_exact_beats_prefix_beats_generic_within_a_level():
    item = "ui.feature.graphicalEditor.workflows.create"
    generic = rule("viewer", UI, "*", view=True)
    prefix = rule("viewer", UI, "ui.feature.graphicalEditor.*", view=True)
    exact = rule("viewer", UI, item, view=False)
    roles = {"viewer": INSTANCE}

    assert resolve(UI, item, roles, generic).allowed
    assert resolve(UI, item, roles, generic, prefix).rules[0].item == "ui.feature.graphicalEditor.*"
    decision = resolve(UI, item, roles, generic, prefix, exact)
    assert not decision.allowed and deciders(decision) == {("viewer", item)}
    # Other items under the prefix stay visible: the exact rule decides only its own item.
    assert resolve(UI, "ui.feature.graphicalEditor.editor", roles, generic, prefix, exact).allowed


def test_a_longer_prefix_beats_a_shorter_one_and_specificity_spans_roles_of_a_level():
    item = "resource.feature.graphicalEditor.publish"
    decision = resolve(
        RESOURCE, item, {"broad": MANDATE, "narrow": MANDATE},
        rule("broad", RESOURCE, "resource.*", view=True),
        rule("narrow", RESOURCE, "resource.feature.graphicalEditor.*", view=False),
    )
    assert not decision.allowed
    assert deciders(decision) == {("narrow", "resource.feature.graphicalEditor.*")}


def test_a_prefix_rule_covers_its_stem_but_not_a_sibling_with_the_same_start():
    roles = {"r": INSTANCE}
    prefix = rule("r", UI, "ui.feature.graphicalEditor.*", view=True)
    assert resolve(UI, "ui.feature.graphicalEditor", roles, prefix).allowed
    assert not resolve(UI, "ui.feature.graphicalEditorPro", roles, prefix).allowed
    assert resolve(UI, "ui.feature.graphicalEditorPro", roles, prefix).priority is None


def test_rules_of_other_contexts_are_ignored():
    item = "resource.feature.graphicalEditor.execute"
    decision = resolve(
        RESOURCE, item, {"r": INSTANCE, "m": MANDATE},
        rule("r", UI, "*", view=True),
        rule("r", DATA, "*", read="all", create="all", update="all", delete="all"),
        rule("m", RESOURCE, item, view=True),
    )
    assert decision.allowed and decision.priority == MANDATE
    assert resolve(RESOURCE, item, {"r": INSTANCE}, rule("r", UI, "*", view=True)).rights == NO_RIGHTS


def test_no_rule_means_nothing_is_allowed():
    decision = resolve(DATA, ITEM, {"r": INSTANCE}, rule("r", DATA, "data.feature.workspace.*", read="all"))
    assert decision.rights == NO_RIGHTS and decision.priority is None and decision.rules == ()
    assert "nothing is allowed" in decision.explain()
    assert resolve(UI, "ui.admin", {}).rights == NO_RIGHTS
    # A role the user holds but whose rules were not loaded counts as holding no rules.
    assert decide(UI, "ui.admin", [HeldRole("x", "x", INSTANCE)], {}).rights == NO_RIGHTS


def test_decision_as_dict_names_role_level_and_rule():
    decision = resolve(DATA, ITEM, {"graphicalEditor-viewer": INSTANCE},
                       rule("graphicalEditor-viewer", DATA, "data.feature.graphicalEditor.*", read="all"))
    assert decision.as_dict() == {
        "context": DATA, "item": ITEM, "level": "instance",
        "rights": {"view": False, "read": "all", "create": "none", "update": "none", "delete": "none"},
        "rules": [{"role": "graphicalEditor-viewer", "level": "instance", "item": "data.feature.graphicalEditor.*",
                   "rights": {"view": False, "read": "all", "create": "none", "update": "none",
                              "delete": "none"}}],
        "explanation": "decided at instance level by role 'graphicalEditor-viewer' "
                       "rule 'data.feature.graphicalEditor.*'",
    }


# --- laws (hypothesis) -----------------------------------------------------------------------------

RULE_ITEMS = ("*", "a.*", "a.b.*", "a.b", "a.b.c", "a.b.c.*", "a.bc.*", "x.*", "x.y")
QUERY_ITEMS = ("a", "a.b", "a.b.c", "a.bc", "a.b.c.d", "x.y", "z")
LEVELS = ("none", "own", "all")

rule_specs = st.tuples(
    st.sampled_from(CONTEXTS), st.sampled_from(RULE_ITEMS), st.booleans(),
    *(st.sampled_from(LEVELS) for _ in OPERATIONS),
)
role_specs = st.tuples(st.sampled_from(list(Priority)), st.lists(rule_specs, max_size=4, unique_by=lambda s: s[:2]))


@st.composite
def scenarios(draw):
    """(context, item, held roles, their rules) with 0–5 roles of random priorities."""
    roles = draw(st.lists(role_specs, max_size=5))
    held, by_role = [], {}
    for index, (priority, specs) in enumerate(roles):
        role_id = f"role{index}"
        held.append(HeldRole(role_id, f"label{index}", priority))
        by_role[role_id] = [rule(role_id, *spec) for spec in specs]
    return draw(st.sampled_from(CONTEXTS)), draw(st.sampled_from(QUERY_ITEMS)), held, by_role


def matching(context, item, held, by_role):
    """Every (priority, specificity, role, rule) that covers the item in the context."""
    return [(role.priority, specificity(r.item, item), role, r)
            for role in held for r in by_role.get(role.id, ())
            if r.context == context and specificity(r.item, item) is not None]


def rights_of(r: AccessRule) -> Rights:
    return Rights(r.view, *(Level.parse(getattr(r, op)) for op in OPERATIONS))


def same(a: Decision, b: Decision) -> bool:
    return (a.rights, a.priority, sorted(map(repr, a.rules))) == (b.rights, b.priority, sorted(map(repr, b.rules)))


LAWS = settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


@LAWS
@given(scenarios())
def test_law_the_result_is_the_union_of_the_deciding_priority_and_specificity_group(scenario):
    context, item, held, by_role = scenario
    decision = decide(context, item, held, by_role)
    matches = matching(context, item, held, by_role)
    if not matches:
        assert decision.rights == NO_RIGHTS and decision.priority is None and decision.rules == ()
        return
    top = max((p, s) for p, s, _, _ in matches)
    group = [(role, r) for p, s, role, r in matches if (p, s) == top]
    expected = NO_RIGHTS
    for _, r in group:
        expected = expected.union(rights_of(r))
    assert decision.priority == top[0]
    assert decision.rights == expected
    assert sorted((m.role_label, m.item) for m in decision.rules) == sorted((role.label, r.item) for role, r in group)


@LAWS
@given(scenarios())
def test_law_view_is_true_iff_some_winning_rule_has_view(scenario):
    decision = decide(*scenario)
    assert decision.allowed == any(m.rights.view for m in decision.rules)
    for op in OPERATIONS:
        assert decision.level(op) == max((m.rights.level(op) for m in decision.rules), default=Level.NONE)


@LAWS
@given(scenarios(), st.randoms(use_true_random=False))
def test_law_order_of_roles_and_rules_does_not_matter(scenario, rnd: random.Random):
    context, item, held, by_role = scenario
    shuffled_held = rnd.sample(held, len(held))
    shuffled_rules = {k: rnd.sample(v, len(v)) for k, v in by_role.items()}
    assert same(decide(context, item, held, by_role), decide(context, item, shuffled_held, shuffled_rules))


@LAWS
@given(scenarios(), st.lists(rule_specs, min_size=1, max_size=4), st.data())
def test_law_a_rule_at_a_lower_priority_than_the_deciding_one_changes_nothing(scenario, extra, data):
    context, item, held, by_role = scenario
    before = decide(context, item, held, by_role)
    lower = [p for p in Priority if before.priority is not None and p < before.priority]
    if not lower:
        return
    priority = data.draw(st.sampled_from(lower))
    added = HeldRole("extra", "extra", priority)
    after = decide(context, item, [*held, added], {**by_role, "extra": [rule("extra", *s) for s in extra]})
    assert same(before, after)


@LAWS
@given(scenarios(), st.lists(rule_specs, min_size=1, max_size=4))
def test_law_a_less_specific_rule_at_the_deciding_priority_changes_nothing(scenario, extra):
    context, item, held, by_role = scenario
    before = decide(context, item, held, by_role)
    if before.priority is None:
        return
    best = max(specificity(m.item, item) for m in before.rules)
    weaker = [s for s in extra if (s[0] != context or specificity(s[1], item) is None
                                  or specificity(s[1], item) < best)]
    added = HeldRole("extra", "extra", before.priority)
    after = decide(context, item, [*held, added], {**by_role, "extra": [rule("extra", *s) for s in weaker]})
    assert same(before, after)


@LAWS
@given(scenarios(), st.lists(rule_specs, max_size=4))
def test_law_rules_of_other_contexts_change_nothing(scenario, extra):
    context, item, held, by_role = scenario
    others = [s for s in extra if s[0] != context]
    role_ids = [r.id for r in held] or ["nobody"]
    extended = {k: list(v) for k, v in by_role.items()}
    for spec, role_id in zip(others, itertools.cycle(role_ids), strict=False):
        extended.setdefault(role_id, []).append(rule(role_id, *spec))
    assert same(decide(context, item, held, by_role), decide(context, item, held, extended))


@LAWS
@given(scenarios(), rule_specs, st.data())
def test_law_a_role_at_a_new_highest_level_with_a_matching_rule_decides(scenario, spec, data):
    context, item, held, by_role = scenario
    highest = max((r.priority for r in held), default=0)
    higher = [p for p in Priority if p > highest]
    if not higher:
        return
    priority = data.draw(st.sampled_from(higher))
    spec = (context, data.draw(st.sampled_from([i for i in RULE_ITEMS if specificity(i, item) is not None])), *spec[2:])
    new_rule = rule("new", *spec)
    after = decide(context, item, [*held, HeldRole("new", "new", priority)], {**by_role, "new": [new_rule]})
    assert after.priority == priority
    assert after.rights == rights_of(new_rule)
    assert deciders(after) == {("new", new_rule.item)}


@LAWS
@given(scenarios(), rule_specs)
def test_law_an_equally_specific_rule_at_the_deciding_level_only_adds_rights(scenario, spec):
    context, item, held, by_role = scenario
    before = decide(context, item, held, by_role)
    if before.priority is None:
        return
    winner = before.rules[0].item
    new_rule = rule("peer", context, winner, *spec[2:])
    after = decide(context, item, [*held, HeldRole("peer", "peer", before.priority)], {**by_role, "peer": [new_rule]})
    assert after.priority == before.priority
    assert after.rights == before.rights.union(rights_of(new_rule))


# --- AccessResolver short-cuts -----------------------------------------------------------------------


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_resolver_system_administrator_gets_everything_and_a_disabled_user_nothing(engine):
    from backend.rbac.templates import ensure_template_roles
    from backend.tenancy import create_mandate, grant_mandate_roles

    with Session(engine) as session:
        ensure_template_roles(session, {})
        mandate = create_mandate(session, "Resolver Corp")
        admin = User(username="mandate-admin")
        root = User(username="root", is_sysadmin=True)
        session.add_all([admin, root])
        session.flush()
        grant_mandate_roles(session, admin, mandate, ["admin"])

        for context, item in ((UI, "ui.admin"), (RESOURCE, "resource.mandate.manageUsers"), (DATA, ITEM)):
            # The system administrator holds no role in the mandate and still may do everything.
            decision = AccessResolver(session, root).resolve(context, item, mandate.id)
            assert decision.rights == ALL_RIGHTS and "system administrators" in decision.explain()
            assert AccessResolver(session, root).resolve(context, item, None).rights == ALL_RIGHTS
            # The mandate admin's rights come from the copy of the admin template (mandate level).
            decision = AccessResolver(session, admin).resolve(context, item, mandate.id)
            assert decision.priority == MANDATE and deciders(decision) == {("admin", "*")}
            assert decision.level("delete") == Level.ALL if context == DATA else decision.allowed

        admin.disabled = True
        root.disabled = True
        for context, item in ((UI, "ui.admin"), (RESOURCE, "resource.mandate.manageUsers"), (DATA, ITEM)):
            for user in (admin, root):
                decision = AccessResolver(session, user).resolve(context, item, mandate.id)
                assert decision.rights == NO_RIGHTS and decision.explain() == "the account is disabled"


# --- a door's per-call scope (backend.rbac.door.Door.call_scope) --------------------------------------


def test_a_door_checks_a_call_in_the_scope_its_arguments_name_and_not_found_comes_first():
    from types import SimpleNamespace

    from backend.errors import Forbidden, NotFound
    from backend.rbac.door import Door, guarded
    from backend.rbac.templates import MANAGE_USERS

    asked: list[tuple] = []

    class FakeAccess:
        user = SimpleNamespace(id="u1", is_sysadmin=False)

        def resolve(self, context, item, mandate_id, instance_id=None):
            asked.append((context, item, mandate_id, instance_id))
            return SimpleNamespace(allowed=mandate_id == "mine")

    class ByMandate(Door):
        def __init__(self):
            self.access = FakeAccess()

        def call_scope(self, method, arguments):
            if arguments["mandate_id"] == "foreign":
                raise NotFound("mandate foreign not found")
            return arguments["mandate_id"], None

        @guarded("RESOURCE", MANAGE_USERS)
        def members(self, mandate_id: str, *, extra: int = 0) -> str:
            return f"members of {mandate_id}"

    door = ByMandate()
    assert door.members("mine") == "members of mine"
    assert door.members(mandate_id="mine", extra=1) == "members of mine"
    with pytest.raises(Forbidden):
        door.members("other")
    asked.clear()
    with pytest.raises(NotFound):
        door.members("foreign")
    assert asked == []  # no right was looked up for a mandate the caller may not see

    class Plain(Door):  # no call_scope: its own scope, and an enforce(permission) of one argument
        mandate_id = "mine"

        def __init__(self):
            self.access = FakeAccess()
            self.seen = []

        def enforce(self, permission):
            self.seen.append(permission.item)
            super().enforce(permission)

        @guarded("RESOURCE", MANAGE_USERS)
        def members(self) -> str:
            return "members"

    plain = Plain()
    assert plain.members() == "members" and plain.seen == [MANAGE_USERS]
