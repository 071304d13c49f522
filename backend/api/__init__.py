"""The REST API (FastAPI), mounted on the Reflex backend under /api."""
