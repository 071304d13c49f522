"""The AI Workspace feature: chat with the agent over the user's data."""
