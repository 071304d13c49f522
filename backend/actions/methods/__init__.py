"""Method modules: each declares actions with @action; all are imported by the registry."""
