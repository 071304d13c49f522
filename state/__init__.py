"""Reflex state classes: thin, they call backend/ and hold what the page shows."""
