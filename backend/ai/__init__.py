"""AI access for the platform: one small client interface and neutralisation of personal data.

`get_ai_client()` is the only way code reaches a model; the AI-service work replaces what it
returns (gateway with failover and streaming) without changing callers.
"""

from backend.ai.client import (
    AiClient,
    AiError,
    AiNotConfigured,
    AiProviderError,
    AiReply,
    OpenAICompatibleClient,
    get_ai_client,
    parse_json_reply,
)

__all__ = [
    "AiClient", "AiError", "AiNotConfigured", "AiProviderError", "AiReply", "OpenAICompatibleClient",
    "get_ai_client", "parse_json_reply",
]
