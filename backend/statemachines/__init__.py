"""The lifecycles of DESIGN §5, one small module each."""

from backend.statemachines.base import ConcurrentTransition, IllegalTransition

__all__ = ["ConcurrentTransition", "IllegalTransition"]
