"""The "ai" toolbox through execute_action, against the scripted OpenAI-compatible server.

Real HTTP on 127.0.0.1 and the real `openai` client: the tests assert on what the server
received (model, messages, files) and on what the actions return, on provider failures and on
the message without a configured provider.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from backend.actions import execute_action, get_registry
from backend.actions.openai_tools import execute_tool_call
from backend.actions.registry import ActionRegistry
from backend.config import reset_settings_cache
from tests.ai_server import tiny_png

SQLITE = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
PNG = tiny_png(3, 2, (10, 120, 240))
PNG_B64 = base64.b64encode(PNG).decode()

AI_ACTIONS = ("ai.summarizeContent", "ai.summarize", "ai.describeImage", "ai.generateImage", "ai.textToSpeech",
              "ai.speechToText", "ai.neutralizeData", "ai.process", "ai.webResearch", "ai.translate", "ai.generate",
              "context.extract", "context.neutralize", "context.transform", "file.create")

# One valid call per action that needs the model (webResearch needs a search first: own tests).
MODEL_CALLS: dict[str, dict[str, Any]] = {
    "ai.summarizeContent": {"content": "A long text about the weather."},
    "ai.summarize": {"text": "A long text about the weather."},
    "ai.describeImage": {"imageBase64": PNG_B64},
    "ai.generateImage": {"prompt": "a blue square"},
    "ai.textToSpeech": {"text": "Hello"},
    "ai.speechToText": {"audioBase64": base64.b64encode(b"RIFF-audio").decode(), "filename": "a.wav"},
    "ai.process": {"prompt": "Classify", "input": "hi"},
    "ai.translate": {"text": "Hallo", "targetLanguage": "English"},
    "ai.generate": {"prompt": "Write a haiku"},
    "context.extract": {"text": "Invoice 42", "fields": [{"name": "number"}]},
}


def _file_service():
    try:
        from backend.files import service
    except ImportError:
        return None
    return service


def run(action_id: str, params: dict[str, Any], context) -> Any:
    result = execute_action(action_id, params, context)
    assert result.ok, result.error
    return result.output


# --- the catalogue --------------------------------------------------------------------------


def test_every_ai_action_is_registered_in_the_ai_toolbox():
    registry = get_registry()
    for action_id in AI_ACTIONS:
        found = registry.get(action_id)
        assert found is not None, action_id
        assert found.toolbox == "ai", action_id
    assert registry.get("executeCode") is None
    agent_tools = {a.id for a in registry.agent_tools(["ai"])}
    assert {"ai.summarizeContent", "ai.describeImage", "ai.generateImage", "ai.textToSpeech", "ai.speechToText",
            "ai.neutralizeData", "ai.executeCode"} <= agent_tools
    nodes = {a.id for a in registry.graph_nodes()}
    assert {"ai.process", "ai.webResearch", "ai.summarize", "ai.translate", "ai.generate", "context.extract",
            "context.neutralize", "context.transform", "file.create"} <= nodes


# --- summaries ------------------------------------------------------------------------------


@SQLITE
def test_summarize_content_sends_the_content_to_the_configured_model(action_context, ai_server):
    ai_server.reply("Rain tomorrow, sun on Sunday.")
    output = run("ai.summarizeContent", {"content": "The forecast: rain on Saturday. Sunday will be sunny.",
                                         "maxWords": 40, "focus": "the weekend"}, action_context)
    assert output["summary"] == "Rain tomorrow, sun on Sunday."
    assert output["model"] == "test-model" and output["usage"]["total_tokens"] > 0
    request = ai_server.last_chat
    assert request.model == "test-model"
    assert [m["role"] for m in request.messages] == ["system", "user"]
    assert "summarise" in request.system_text.lower()
    assert "rain on Saturday" in request.user_text and "at most 40 words" in request.user_text
    assert "the weekend" in request.user_text
    assert request.headers["authorization"] == "Bearer test-key"


@SQLITE
def test_summarize_node_asks_for_bullets_in_a_language(action_context, ai_server):
    ai_server.reply("- Regen\n- Sonne")
    output = run("ai.summarize", {"text": "Rain, then sun.", "style": "bullets", "language": "German"},
                 action_context)
    assert output["summary"] == "- Regen\n- Sonne"
    assert "bulleted" in ai_server.last_chat.user_text and "German" in ai_server.last_chat.user_text


@SQLITE
def test_an_agent_tool_call_reaches_the_model(action_context, ai_server):
    ai_server.reply("Short.")
    result = execute_tool_call("ai_summarizeContent", json.dumps(
        {"content": "Long text", "maxWords": None, "language": None, "focus": None}), action_context)
    assert result.ok and result.output["summary"] == "Short."


# --- images ---------------------------------------------------------------------------------


@SQLITE
def test_describe_image_sends_the_image_as_a_data_uri(action_context, ai_server):
    ai_server.reply("A blue rectangle.")
    output = run("ai.describeImage", {"imageBase64": PNG_B64, "prompt": "What colour is it?"}, action_context)
    assert output == {"description": "A blue rectangle.", "mimeType": "image/png"}
    content = ai_server.last_chat.messages[-1]["content"]
    assert content[0] == {"type": "text", "text": "What colour is it?"}
    assert content[1]["type"] == "image_url"
    assert content[1]["image_url"]["url"] == f"data:image/png;base64,{PNG_B64}"
    assert ai_server.last_chat.model == "test-model"


@SQLITE
def test_describe_image_accepts_a_data_uri_and_a_mime_type(action_context, ai_server):
    run("ai.describeImage", {"imageBase64": f"data:image/png;base64,{PNG_B64}"}, action_context)
    assert ai_server.last_chat.messages[-1]["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")
    run("ai.describeImage", {"imageBase64": base64.b64encode(b"<svg/>").decode(), "mimeType": "image/svg+xml"},
        action_context)
    assert ai_server.last_chat.messages[-1]["content"][1]["image_url"]["url"].startswith("data:image/svg+xml;")


@SQLITE
def test_describe_image_refuses_bad_input_before_calling_the_model(action_context, ai_server):
    cases = {
        "neither": ({}, "exactly one of path and imageBase64"),
        "both": ({"imageBase64": PNG_B64, "path": "/a.png"}, "exactly one of path and imageBase64"),
        "not base64": ({"imageBase64": "%%%"}, "imageBase64 is not valid base64"),
        "not an image": ({"imageBase64": base64.b64encode(b"hello world").decode()}, "not an image"),
    }
    for name, (params, message) in cases.items():
        result = execute_action("ai.describeImage", params, action_context)
        assert not result.ok and message in result.error, (name, result.error)
    assert ai_server.requests == []


@SQLITE
def test_describe_image_reads_a_stored_file_by_path(action_context, ai_server):
    service = _file_service()
    if service is None:
        pytest.skip("the file store is not installed")
    service.store_file(action_context, "/photos/dot.png", PNG, "image/png")
    ai_server.reply("A dot.")
    output = run("ai.describeImage", {"path": "/photos/dot.png"}, action_context)
    assert output["description"] == "A dot."
    assert ai_server.last_chat.messages[-1]["content"][1]["image_url"]["url"] == f"data:image/png;base64,{PNG_B64}"
    missing = execute_action("ai.describeImage", {"path": "/photos/none.png"}, action_context)
    assert not missing.ok and "none.png" in missing.error


@SQLITE
def test_generate_image_returns_the_png(action_context, ai_server):
    ai_server.image_png = PNG
    output = run("ai.generateImage", {"prompt": "a blue square", "size": "512x512"}, action_context)
    assert base64.b64decode(output["base64"]) == PNG
    assert output["mimeType"] == "image/png" and output["sizeBytes"] == len(PNG) and output["path"] is None
    request = ai_server.requests_to("/v1/images/generations")[-1]
    assert request.json["prompt"] == "a blue square" and request.json["size"] == "512x512"
    assert request.json["response_format"] == "b64_json" and request.json["model"] == "dall-e-3"


@SQLITE
def test_generate_image_can_save_into_the_file_store(action_context, ai_server):
    service = _file_service()
    if service is None:
        pytest.skip("the file store is not installed")
    output = run("ai.generateImage", {"prompt": "logo", "saveAs": "/images/logo.png"}, action_context)
    assert output["path"] == "/images/logo.png" and output["base64"] is None
    entry, data = service.read_bytes(action_context, "/images/logo.png")
    assert data == ai_server.image_png and entry.mime_type == "image/png"


@SQLITE
def test_image_model_is_configurable(action_context, ai_server, monkeypatch):
    monkeypatch.setenv("POWERON_AI_IMAGE_MODEL", "gpt-image-1")
    reset_settings_cache()
    run("ai.generateImage", {"prompt": "x"}, action_context)
    request = ai_server.requests_to("/v1/images/generations")[-1]
    assert request.json["model"] == "gpt-image-1" and "response_format" not in request.json


# --- speech ---------------------------------------------------------------------------------


@SQLITE
def test_text_to_speech_returns_the_audio(action_context, ai_server):
    output = run("ai.textToSpeech", {"text": "Guten Tag", "voice": "nova", "format": "wav"}, action_context)
    assert base64.b64decode(output["base64"]) == ai_server.speech_bytes
    assert output["mimeType"] == "audio/wav"
    request = ai_server.requests_to("/v1/audio/speech")[-1]
    assert request.json == {"model": "tts-1", "input": "Guten Tag", "voice": "nova", "response_format": "wav"}


@SQLITE
def test_speech_to_text_uploads_the_audio(action_context, ai_server):
    ai_server.transcript = "Guten Tag, hier spricht Anna."
    audio = b"RIFF\x00\x00\x00\x00WAVEfmt fake audio"
    output = run("ai.speechToText", {"audioBase64": base64.b64encode(audio).decode(), "filename": "memo.wav",
                                     "language": "de"}, action_context)
    assert output == {"text": "Guten Tag, hier spricht Anna."}
    request = ai_server.requests_to("/v1/audio/transcriptions")[-1]
    filename, data, _ = request.form["file"]
    assert (filename, data) == ("memo.wav", audio)
    assert request.form["model"] == "whisper-1" and request.form["language"] == "de"


@SQLITE
def test_speech_to_text_reads_a_stored_file(action_context, ai_server):
    service = _file_service()
    if service is None:
        pytest.skip("the file store is not installed")
    service.store_file(action_context, "/audio/memo.mp3", b"ID3 fake mp3", "audio/mpeg")
    assert run("ai.speechToText", {"path": "/audio/memo.mp3"}, action_context) == {"text": "scripted transcript"}
    filename, data, _ = ai_server.requests_to("/v1/audio/transcriptions")[-1].form["file"]
    assert (filename, data) == ("memo.mp3", b"ID3 fake mp3")


# --- neutralisation -------------------------------------------------------------------------


@SQLITE
def test_neutralize_data_replaces_personal_data_without_calling_the_model(action_context, ai_server, monkeypatch):
    monkeypatch.setenv("POWERON_NEUTRALIZE_NAMES", "Anna Meier")
    reset_settings_cache()
    output = run("ai.neutralizeData", {"text": "Anna Meier, anna@meier.ch, +41 79 123 45 67, Hans",
                                       "names": ["Hans"]}, action_context)
    assert output["text"] == "[PERSON_1], [EMAIL_1], [PHONE_1], [PERSON_2]"
    assert output["mapping"] == {"[PERSON_1]": "Anna Meier", "[EMAIL_1]": "anna@meier.ch",
                                 "[PHONE_1]": "+41 79 123 45 67", "[PERSON_2]": "Hans"}
    assert output["found"] == {"PERSON": 2, "EMAIL": 1, "PHONE": 1}
    assert ai_server.requests == []


@SQLITE
def test_context_neutralize_handles_data_and_restores_it(action_context, ai_server):
    data = {"to": "anna@meier.ch", "lines": ["IBAN CH93 0076 2011 6238 5295 7", "AHV 756.9217.0769.85"]}
    hidden = run("context.neutralize", {"data": data}, action_context)
    assert hidden["data"] == {"to": "[EMAIL_1]", "lines": ["IBAN [IBAN_1]", "AHV [AHV_1]"]}
    answer = "Sent [IBAN_1] details to [EMAIL_1]."
    restored = run("context.neutralize", {"mode": "restore", "text": answer, "mapping": hidden["mapping"]},
                   action_context)
    assert restored["text"] == "Sent CH93 0076 2011 6238 5295 7 details to anna@meier.ch."
    back = run("context.neutralize", {"mode": "restore", "data": hidden["data"], "mapping": hidden["mapping"]},
               action_context)
    assert back["data"] == data
    invalid = execute_action("context.neutralize", {"mode": "restore", "text": "x"}, action_context)
    assert not invalid.ok and "mapping" in invalid.error
    assert ai_server.requests == []


# --- general AI nodes -----------------------------------------------------------------------


@SQLITE
def test_process_sends_instruction_input_and_parses_json(action_context, ai_server):
    ai_server.reply_json({"category": "invoice", "confidence": 0.9})
    output = run("ai.process", {"prompt": "Classify this document.", "input": {"subject": "Rechnung 42"},
                                "systemPrompt": "You sort mail.", "responseFormat": "json", "temperature": 0},
                 action_context)
    assert output["data"] == {"category": "invoice", "confidence": 0.9}
    request = ai_server.last_chat
    assert request.json["response_format"] == {"type": "json_object"} and request.json["temperature"] == 0
    assert request.system_text == "You sort mail."
    assert "Classify this document." in request.user_text and '"subject": "Rechnung 42"' in request.user_text


@SQLITE
def test_process_reports_an_answer_that_is_not_json(action_context, ai_server):
    ai_server.reply("Sorry, I cannot.")
    result = execute_action("ai.process", {"prompt": "Give JSON", "responseFormat": "json"}, action_context)
    assert not result.ok and "did not answer with valid JSON" in result.error and "Sorry" in result.error


@SQLITE
def test_generate_and_translate(action_context, ai_server):
    ai_server.reply("# Title\n\nBody")
    generated = run("ai.generate", {"prompt": "A short post about Zurich", "format": "markdown", "maxWords": 80,
                                    "language": "German", "model": "other-model"}, action_context)
    assert generated["text"] == "# Title\n\nBody" and generated["model"] == "other-model"
    request = ai_server.last_chat
    assert request.model == "other-model"
    assert "Markdown" in request.system_text and "80 words" in request.system_text and "German" in request.system_text
    assert request.user_text == "A short post about Zurich"

    ai_server.reply("Good morning")
    translated = run("ai.translate", {"text": "Guten Morgen", "targetLanguage": "English", "sourceLanguage": "German"},
                     action_context)
    assert translated == {"text": "Good morning", "targetLanguage": "English", "model": "test-model"}
    assert "from German into English" in ai_server.last_chat.system_text
    assert ai_server.last_chat.user_text == "Guten Morgen"


@SQLITE
def test_an_empty_answer_is_an_error(action_context, ai_server):
    ai_server.reply("   ")
    result = execute_action("ai.generate", {"prompt": "x"}, action_context)
    assert not result.ok and "empty answer" in result.error


# --- context.extract ------------------------------------------------------------------------


@SQLITE
def test_extract_fields_with_a_schema_from_the_model(action_context, ai_server):
    ai_server.reply_json({"number": "42", "total": 1250.5, "due": None, "note": "extra"})
    output = run("context.extract", {
        "text": "Rechnung 42 über CHF 1'250.50",
        "fields": [{"name": "number", "type": "integer", "required": True},
                   {"name": "total", "type": "number", "description": "amount in CHF"},
                   {"name": "due", "type": "string", "required": True}],
    }, action_context)
    assert output["data"] == {"number": "42", "total": 1250.5, "due": None}
    assert output["missing"] == ["due"] and output["invalid"] == ["number: expected ['integer', 'null']"]
    request = ai_server.last_chat
    assert request.json["response_format"] == {"type": "json_object"}
    schema_text = request.system_text.split("JSON Schema:\n", 1)[1].split("\n", 1)[0]
    schema = json.loads(schema_text)
    assert schema["required"] == ["number", "due"]
    assert schema["properties"]["total"] == {"type": ["number", "null"], "description": "amount in CHF"}
    assert "Rechnung 42" in request.user_text

    ai_server.reply_json({"name": "Anna", "age": 41})
    output = run("context.extract", {"text": "Anna (41)", "schema": {
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name"]}},
        action_context)
    assert output["data"] == {"name": "Anna", "age": 41} and output["missing"] == [] and output["invalid"] == []

    invalid = execute_action("context.extract", {"text": "x", "schema": {"type": "object"}}, action_context)
    assert not invalid.ok and "properties" in invalid.error


# --- context.transform and file.create (no model) ------------------------------------------


@SQLITE
def test_transform_with_a_template_and_with_a_mapping(action_context, ai_server):
    data = {"customer": {"name": "Anna"}, "items": [{"price": 10}, {"price": 5.5}]}
    text = run("context.transform", {"data": data, "template": "Dear {{ customer.name }}: "
                                     "{{ items | sum(attribute='price') }} CHF"}, action_context)
    assert text == {"result": "Dear Anna: 15.5 CHF", "missing": []}
    as_json = run("context.transform", {"data": data, "output": "json",
                                        "template": '{"who": {{ customer.name | json }}, "n": {{ items | length }}}'},
                  action_context)
    assert as_json["result"] == {"who": "Anna", "n": 2}
    mapped = run("context.transform", {"data": data, "mapping": {
        "name": "customer.name", "first": "items[0].price", "total": "{{ items | sum(attribute='price') }}",
        "city": "customer.city", "country": "customer.country"}, "defaults": {"country": "CH"}}, action_context)
    assert mapped == {"result": {"name": "Anna", "first": 10, "total": 15.5, "city": None, "country": "CH"},
                      "missing": ["city"]}
    undefined = execute_action("context.transform", {"data": data, "template": "{{ nothing.here }}"}, action_context)
    assert not undefined.ok and "'nothing' is undefined" in undefined.error
    unsafe = execute_action("context.transform", {"data": data, "template": "{{ customer.__class__ }}"},
                            action_context)
    assert not unsafe.ok and "unsafe" in unsafe.error
    both = execute_action("context.transform", {"data": data, "template": "x", "mapping": {}}, action_context)
    assert not both.ok and "exactly one of template and mapping" in both.error
    assert ai_server.requests == []


@SQLITE
def test_file_create_stores_the_file(action_context):
    service = _file_service()
    output = run("file.create", {"path": "/reports/summary.md", "content": "# Summary\n\nAll good."},
                 action_context)
    assert output["name"] == "summary.md" and output["sizeBytes"] == len("# Summary\n\nAll good.")
    if service is None:
        assert output["stored"] is False and output["content"] == "# Summary\n\nAll good."
        return
    assert output["stored"] is True and output["path"] == "/reports/summary.md" and output["id"]
    entry, data = service.read_bytes(action_context, "/reports/summary.md")
    assert data == b"# Summary\n\nAll good."
    again = execute_action("file.create", {"path": "/reports/summary.md", "content": "new"}, action_context)
    assert not again.ok and "summary.md" in again.error
    replaced = run("file.create", {"path": "/reports/summary.md", "content": base64.b64encode(b"new").decode(),
                                   "encoding": "base64", "overwrite": True}, action_context)
    assert replaced["sizeBytes"] == 3
    assert service.read_bytes(action_context, "/reports/summary.md")[1] == b"new"


@SQLITE
def test_file_create_without_an_instance_returns_the_content(action_context):
    action_context.feature_instance_id = None
    output = run("file.create", {"path": "notes.txt", "content": "hello"}, action_context)
    assert output["stored"] is False and output["content"] == "hello" and output["mimeType"] == "text/plain"


# --- web research ---------------------------------------------------------------------------


class _Web:
    """A search API (SearXNG JSON) and a few pages on 127.0.0.1."""

    def __init__(self) -> None:
        self.pages: dict[str, tuple[int, str]] = {}
        self.search_results: list[dict[str, str]] = []
        self.queries: list[str] = []
        web = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

            def do_GET(self) -> None:  # noqa: N802
                parts = urlsplit(self.path)
                if parts.path == "/search":
                    web.queries.append(parse_qs(parts.query).get("q", [""])[0])
                    self._send(200, json.dumps({"results": web.search_results}).encode(), "application/json")
                    return
                status, html = web.pages.get(parts.path, (404, "<html><body>not found</body></html>"))
                self._send(status, html.encode(), "text/html; charset=utf-8")

            def _send(self, status: int, body: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def local_web(monkeypatch) -> Iterator[_Web]:
    web = _Web()
    monkeypatch.setenv("POWERON_SEARCH_URL", web.url(""))
    monkeypatch.setenv("POWERON_READURL_ALLOW_PRIVATE", "1")
    reset_settings_cache()
    try:
        yield web
    finally:
        web.stop()


ARTICLE = """<html><head><title>{title}</title></head><body><nav>Home | News</nav><article>
<h1>{title}</h1><p>{text}</p><p>The report was published by the cantonal office and covers
the years from 2019 to 2024 in detail, with tables for every district of the canton.</p></article>
<footer>Impressum</footer></body></html>"""


@SQLITE
def test_web_research_searches_reads_the_pages_and_answers_with_sources(action_context, ai_server, local_web):
    if get_registry().get("core.webSearch") is None or get_registry().get("core.readUrl") is None:
        pytest.skip("the web actions are not installed")
    local_web.pages["/a"] = (200, ARTICLE.format(title="Zurich population",
                                                 text="Zurich had 443,037 inhabitants at the end of 2023."))
    local_web.pages["/b"] = (200, ARTICLE.format(title="Growth", text="The city grew by 1.1 percent in 2023."))
    local_web.search_results = [
        {"title": "Zurich population", "url": local_web.url("/a"), "content": "Inhabitants of Zurich"},
        {"title": "Gone", "url": local_web.url("/missing"), "content": "A page that is gone"},
        {"title": "Growth", "url": local_web.url("/b"), "content": "Growth rates"},
    ]
    ai_server.reply("Zurich had 443,037 inhabitants at the end of 2023 [1], growing 1.1 % [2].")
    output = run("ai.webResearch", {"question": "How many people live in Zurich?", "maxSources": 3},
                 action_context)
    assert output["answer"].startswith("Zurich had 443,037")
    assert local_web.queries == ["How many people live in Zurich?"]
    assert [(s["url"].rsplit("/", 1)[-1], s["used"]) for s in output["sources"]] == [
        ("a", True), ("missing", False), ("b", True)]
    assert "404" in output["sources"][1]["error"]
    request = ai_server.last_chat
    assert "443,037 inhabitants" in request.user_text and "1.1 percent" in request.user_text
    assert "[1] Zurich population" in request.user_text and "[2] Growth" in request.user_text
    assert "Home | News" not in request.user_text  # main text only
    assert "cite" in request.system_text


@SQLITE
def test_web_research_says_when_the_search_finds_nothing(action_context, ai_server, local_web):
    if get_registry().get("core.webSearch") is None:
        pytest.skip("the web actions are not installed")
    result = execute_action("ai.webResearch", {"question": "nothing at all"}, action_context)
    assert not result.ok and "found nothing" in result.error
    assert ai_server.requests == []


@SQLITE
def test_web_research_without_the_web_actions_is_a_clear_error(action_context, ai_server, monkeypatch):
    full = get_registry()
    without = ActionRegistry({k: v for k, v in full.actions.items() if k not in ("core.webSearch", "core.readUrl")})
    monkeypatch.setattr("backend.actions.registry.get_registry", lambda: without)
    result = execute_action("ai.webResearch", {"question": "anything"}, action_context)
    assert not result.ok and "needs core.webSearch, which is not available" in result.error


@SQLITE
def test_web_research_passes_on_a_search_that_is_not_configured(action_context, ai_server, monkeypatch):
    if get_registry().get("core.webSearch") is None:
        pytest.skip("the web actions are not installed")
    monkeypatch.setenv("POWERON_SEARCH_URL", "")
    reset_settings_cache()
    result = execute_action("ai.webResearch", {"question": "anything"}, action_context)
    assert not result.ok and "core.webSearch" in result.error and "POWERON_SEARCH_URL" in result.error


# --- failures -------------------------------------------------------------------------------


@SQLITE
@pytest.mark.parametrize("action_id", sorted(MODEL_CALLS))
def test_a_provider_error_is_a_clear_message(action_context, ai_server, action_id):
    ai_server.fail(500, "the model is overloaded")
    result = execute_action(action_id, MODEL_CALLS[action_id], action_context)
    assert not result.ok and result.error_kind == "failed", result.error
    assert "answered HTTP 500: the model is overloaded" in result.error
    assert ai_server.base_url in result.error and "Traceback" not in result.error
    assert len(ai_server.requests) == 1  # no retries here: failover is the AI service's


@SQLITE
def test_other_provider_statuses_name_the_status_and_a_hint(action_context, ai_server, monkeypatch):
    ai_server.fail(429, "rate limit reached")
    result = execute_action("ai.summarize", {"text": "x"}, action_context)
    assert "answered HTTP 429: rate limit reached" in result.error
    monkeypatch.setenv("OPENAI_API_KEY", "wrong-key")
    reset_settings_cache()
    result = execute_action("ai.summarize", {"text": "x"}, action_context)
    assert "answered HTTP 401" in result.error and "check OPENAI_API_KEY" in result.error


@SQLITE
def test_a_provider_that_does_not_answer_in_time(action_context, ai_server, monkeypatch):
    monkeypatch.setenv("POWERON_AI_TIMEOUT_SECONDS", "0.5")
    reset_settings_cache()
    ai_server.stall(5)
    result = execute_action("ai.translate", {"text": "Hallo", "targetLanguage": "en"}, action_context)
    assert not result.ok and "did not answer within 0.5 s" in result.error


@SQLITE
def test_an_unreachable_provider(action_context, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    reset_settings_cache()
    result = execute_action("ai.generate", {"prompt": "x"}, action_context)
    assert not result.ok and "http://127.0.0.1:9/v1 could not be reached" in result.error


@SQLITE
@pytest.mark.parametrize("action_id", sorted(MODEL_CALLS))
def test_without_a_provider_the_error_names_openai_api_key(action_context, ai_server, monkeypatch, action_id):
    # Empty rather than unset, so a developer's .env cannot fill it in.
    monkeypatch.setenv("OPENAI_API_KEY", "")
    reset_settings_cache()
    result = execute_action(action_id, MODEL_CALLS[action_id], action_context)
    assert not result.ok and result.error_kind == "failed"
    assert "OPENAI_API_KEY" in result.error and "OPENAI_BASE_URL" in result.error
    assert ai_server.requests == []
