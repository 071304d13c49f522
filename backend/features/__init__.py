"""Feature containers: one sub-package per feature, found by scanning this folder."""
