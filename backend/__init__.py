"""PowerOn Unified's framework-free core (never imports reflex)."""

__version__ = "0.1.0"
