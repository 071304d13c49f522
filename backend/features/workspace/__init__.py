"""The AI Workspace feature: chat with the agent over the user's data."""

FEATURE_CODE = "workspace"
LABEL = "Workspace"
ICON = "message-square"
