"""The Feature Data Agent's instructions (spec §5.4): the schema of the one instance it reads.

Its tools are the `featureData` toolbox of the action library (backend/actions/methods/
feature_data.py); the schema text comes from backend.features.data_access, which applies the
same rights as the tools, so the sub-agent is told only about tables it may read.
"""

from __future__ import annotations

from sqlmodel import Session

from backend.db.models import FeatureInstance, User
from backend.features.data_access import describe_tables


def sub_agent_system_prompt(session: Session, user: User, instance: FeatureInstance) -> str:
    """What a Feature Data Agent needs besides the general prompt: its task and the schema."""
    return ("You are a data agent: answer the question from the data of this one feature instance only, using "
            "your read-only tools; quote the figures you found and say when the data does not answer it.\n"
            + describe_tables(session, user, instance.mandate_id, instance))
