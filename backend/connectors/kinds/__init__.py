"""Connector modules: each registers one connection type (backend/connectors/types.py)."""
