"""Reading a request body ahead of an ASGI app and handing it on unchanged (the API's input
guard, the MCP endpoint's size limit)."""

from __future__ import annotations

from starlette.types import Message, Receive


async def read_body(receive: Receive, limit: int | None = None) -> tuple[bytes | None, Message | None]:
    """The whole body, or what came before the client went away (with that message); None as the
    body once it grows beyond `limit` bytes (the rest is not read)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), message
        chunk = message.get("body", b"")
        size += len(chunk)
        if limit is not None and size > limit:
            return None, None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks), None


def replay(body: bytes, receive: Receive) -> Receive:
    """A receive that hands the app the body read already, then listens to the client again."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed
