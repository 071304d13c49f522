"""AI access for the platform: one small client interface and neutralisation of personal data.

`get_ai_client()` is the only way code reaches a model: it returns the gateway
(`backend.ai.gateway.AiGateway`) over the configured providers, with failover, circuit
breakers, streaming (`chat_stream`), tools, cost in CHF and optional neutralisation.
"""

from backend.ai.client import (
    AiClient,
    AiError,
    AiNotConfigured,
    AiProviderError,
    AiReply,
    ChatDone,
    OpenAICompatibleClient,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    get_ai_client,
    parse_json_reply,
)
from backend.ai.gateway import AiGateway

__all__ = [
    "AiClient", "AiError", "AiGateway", "AiNotConfigured", "AiProviderError", "AiReply", "ChatDone",
    "OpenAICompatibleClient", "StreamEvent", "TextDelta", "ToolCall", "ToolCallDelta", "get_ai_client",
    "parse_json_reply",
]
