"""The "ai" toolbox: AI steps for agents and graphs, neutralisation, and data/file node actions.

Agent tools (seed 004 / spec §5.2): summarizeContent, describeImage, generateImage,
textToSpeech, speechToText, neutralizeData. Node actions (spec §3.1): ai.process,
ai.webResearch, ai.summarize, ai.translate, ai.generate, context.extract, context.neutralize,
context.transform, file.create. executeCode runs code in the engine's sandbox: ai_code.py.

Every model call goes through `backend.ai.get_ai_client()`; without a provider the steps fail
with a message naming OPENAI_API_KEY, provider failures name the HTTP status.
"""

from __future__ import annotations

import base64
import binascii
import json
import mimetypes
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from backend.actions.base import ActionContext, ActionError, ActionParams, action
from backend.ai import AiReply, get_ai_client, parse_json_reply
from backend.ai.client import image_type
from backend.ai.neutralize import neutralize, neutralize_data, restore, restore_data
from backend.ai.transform import TransformError, apply_mapping, render_template

MAX_TEXT = 500_000  # characters of content an AI step accepts
MAX_IMAGE_BYTES = 20 * 1024 * 1024
MAX_AUDIO_BYTES = 25 * 1024 * 1024
AUDIO_MIME = {"mp3": "audio/mpeg", "wav": "audio/wav", "opus": "audio/ogg", "aac": "audio/aac",
              "flac": "audio/flac"}

Kind = Literal["EMAIL", "IBAN", "AHV", "PHONE", "PERSON"]


class _Output(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


# --- helpers --------------------------------------------------------------------------------


def _decode_base64(value: str, field: str, limit: int) -> tuple[bytes, str | None]:
    """Bytes of a base64 parameter (a data: URI is accepted) and the MIME type the URI names."""
    mime = None
    text = value.strip()
    if text.startswith("data:"):
        header, _, text = text.partition(",")
        mime = header[5:].split(";", 1)[0] or None
    if len(text) * 3 // 4 > limit:
        raise ActionError(f"{field} is larger than {limit // (1024 * 1024)} MB")
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ActionError(f"{field} is not valid base64") from None
    if not data:
        raise ActionError(f"{field} is empty")
    return data, mime


def _file_service() -> Any | None:
    """The file store's service module (backend.files.service), when it is installed."""
    try:
        from backend.files import service
    except ImportError:
        return None
    return service


def _read_stored(context: ActionContext, path: str, limit: int) -> tuple[bytes, str | None, str]:
    """Bytes, MIME type and name of a file in this instance's file store (its rights apply)."""
    service = _file_service()
    if service is None:
        raise ActionError("reading by path needs the file store, which is not installed here; "
                          "pass the content as base64 instead")
    entry, data = service.read_bytes(context, path.strip())
    if len(data) > limit:
        raise ActionError(f"{entry.path} is {len(data) // (1024 * 1024)} MB; this step takes at most "
                          f"{limit // (1024 * 1024)} MB")
    return data, entry.mime_type, entry.name


def _write_stored(context: ActionContext, path: str, data: bytes, mime: str | None, overwrite: bool) -> dict[str, Any]:
    """Store bytes at `path` in this instance's file store (its rights and limits apply)."""
    service = _file_service()
    if service is None:
        raise ActionError(f"cannot save to '{path}': the file store is not installed here")
    entry = service.store_file(context, path.strip(), data, mime, overwrite=overwrite)
    return {"path": entry.path, "id": entry.id, "name": entry.name, "mime_type": entry.mime_type}


def _ai_text(reply: AiReply) -> str:
    if not reply.text.strip():
        raise ActionError(f"the AI model ({reply.model}) gave an empty answer")
    return reply.text.strip()


def _language_clause(language: str | None) -> str:
    return f" Write in {language}." if language else " Write in the language of the content."


# --- summaries -----------------------------------------------------------------------------

SUMMARY_SYSTEM = ("You summarise content faithfully. Keep the facts, names, numbers and dates that matter; "
                  "never add anything the content does not say. Answer with the summary only.")


class SummaryOutput(_Output):
    summary: str
    model: str
    usage: dict[str, int] = {}


def _summarize(content: str, max_words: int, language: str | None, focus: str | None, style: str) -> SummaryOutput:
    shape = "as a bulleted list (Markdown '- ')" if style == "bullets" else "as flowing prose"
    focus_clause = f" Focus on: {focus}." if focus else ""
    prompt = (f"Summarise the following content in at most {max_words} words, {shape}."
              f"{_language_clause(language)}{focus_clause}\n\n<content>\n{content}\n</content>")
    reply = get_ai_client().chat(prompt, system=SUMMARY_SYSTEM)
    return SummaryOutput(summary=_ai_text(reply), model=reply.model, usage=reply.usage)


class SummarizeContentParams(ActionParams):
    content: str = Field(min_length=1, max_length=MAX_TEXT, description="The text to summarise.")
    max_words: int = Field(150, ge=10, le=2000, description="Longest summary in words (default 150).")
    language: str | None = Field(None, description="Language of the summary, e.g. 'German'; default: the content's.")
    focus: str | None = Field(None, max_length=500, description="What the summary should concentrate on.")


@action("ai.summarizeContent", toolbox="ai", label="Summarise content",
        description="Summarise a text (a document, page or e-mail) in at most maxWords words, optionally "
                    "in another language or focused on one aspect.",
        params=SummarizeContentParams, output=SummaryOutput, capabilities=("read",), needs=("ai",))
def summarize_content(params: SummarizeContentParams, context: ActionContext) -> SummaryOutput:
    return _summarize(params.content, params.max_words, params.language, params.focus, "prose")


class SummarizeParams(ActionParams):
    text: str = Field(min_length=1, max_length=MAX_TEXT, description="The text to summarise.")
    max_words: int = Field(150, ge=10, le=2000, description="Longest summary in words.")
    style: Literal["prose", "bullets"] = Field("prose", description="Flowing text or a bulleted list.")
    language: str | None = Field(None, description="Language of the summary; default: the text's.")
    focus: str | None = Field(None, max_length=500, description="What the summary should concentrate on.")


@action("ai.summarize", toolbox="ai", label="Summarise",
        description="Summarise the text of an earlier step as prose or bullet points.",
        params=SummarizeParams, output=SummaryOutput, agent_tool=False, graph_node=True, needs=("ai",))
def summarize_node(params: SummarizeParams, context: ActionContext) -> SummaryOutput:
    return _summarize(params.text, params.max_words, params.language, params.focus, params.style)


# --- images ----------------------------------------------------------------------------------


class DescribeImageParams(ActionParams):
    path: str | None = Field(None, description="Path of the image in this workspace's files.")
    image_base64: str | None = Field(None, description="The image as base64 (or a data: URI), instead of a path.")
    mime_type: str | None = Field(None, description="MIME type of imageBase64 when it is not PNG, JPEG, GIF or WebP.")
    prompt: str = Field("Describe this image in detail: what it shows, any text in it, and notable details.",
                        min_length=1, max_length=4000, description="What to look for or answer about the image.")
    model: str | None = Field(None, description="A vision-capable model; default: the configured one.")

    @model_validator(mode="after")
    def _one_source(self) -> DescribeImageParams:
        if bool(self.path) == bool(self.image_base64):
            raise ValueError("give exactly one of path and imageBase64")
        return self


class DescribeImageOutput(_Output):
    description: str
    mime_type: str


@action("ai.describeImage", toolbox="ai", label="Describe image",
        description="Look at an image (a file path or base64) with a vision model and describe it, or answer "
                    "a question about it given as prompt (e.g. read the text on a receipt).",
        params=DescribeImageParams, output=DescribeImageOutput, graph_node=True, needs=("ai",))
def describe_image(params: DescribeImageParams, context: ActionContext) -> DescribeImageOutput:
    if params.path:
        data, mime, _name = _read_stored(context, params.path, MAX_IMAGE_BYTES)
        mime = image_type(data) or mime
    else:
        data, uri_mime = _decode_base64(params.image_base64 or "", "imageBase64", MAX_IMAGE_BYTES)
        mime = params.mime_type or uri_mime or image_type(data)
    if not mime or not mime.startswith("image/"):
        raise ActionError("the data is not an image this step can read (PNG, JPEG, GIF or WebP; "
                          "give mimeType for other formats)")
    description = get_ai_client().image_description(data, mime, params.prompt, model=params.model)
    if not description.strip():
        raise ActionError("the AI model gave an empty description")
    return DescribeImageOutput(description=description.strip(), mime_type=mime)


class GenerateImageParams(ActionParams):
    prompt: str = Field(min_length=1, max_length=4000, description="What the image should show.")
    size: Literal["256x256", "512x512", "1024x1024", "1792x1024", "1024x1792", "1536x1024", "1024x1536"] = Field(
        "1024x1024", description="Width x height in pixels.")
    save_as: str | None = Field(None, description="Save the image at this path in the workspace's files "
                                                  "(e.g. 'images/logo.png'); without it the image comes back "
                                                  "as base64.")


class BinaryOutput(_Output):
    mime_type: str
    size_bytes: int
    path: str | None = Field(None, description="Where the file was saved, when saveAs was given.")
    base64: str | None = Field(None, description="The bytes as base64, when not saved.")


def _binary_result(context: ActionContext, data: bytes, mime: str, save_as: str | None) -> BinaryOutput:
    if save_as:
        stored = _write_stored(context, save_as, data, mime, overwrite=False)
        return BinaryOutput(mime_type=mime, size_bytes=len(data), path=stored.get("path", save_as))
    return BinaryOutput(mime_type=mime, size_bytes=len(data), base64=base64.b64encode(data).decode("ascii"))


@action("ai.generateImage", toolbox="ai", label="Generate image",
        description="Create an image from a text description; saveAs stores it in the workspace's files.",
        params=GenerateImageParams, output=BinaryOutput, graph_node=True, capabilities=("write",), needs=("ai",))
def generate_image(params: GenerateImageParams, context: ActionContext) -> BinaryOutput:
    data = get_ai_client().generate_image(params.prompt, params.size)
    mime = image_type(data) or "image/png"
    return _binary_result(context, data, mime, params.save_as)


# --- speech ----------------------------------------------------------------------------------


class TextToSpeechParams(ActionParams):
    text: str = Field(min_length=1, max_length=4096, description="What to say (at most 4096 characters).")
    voice: str = Field("alloy", min_length=1, max_length=40,
                       description="Voice name, e.g. alloy, echo, fable, onyx, nova or shimmer.")
    format: Literal["mp3", "wav", "opus", "aac", "flac"] = Field("mp3", description="Audio format.")
    save_as: str | None = Field(None, description="Save the audio at this path in the workspace's files; "
                                                  "without it the audio comes back as base64.")


@action("ai.textToSpeech", toolbox="ai", label="Text to speech",
        description="Turn text into spoken audio (mp3 by default); saveAs stores it in the workspace's files.",
        params=TextToSpeechParams, output=BinaryOutput, graph_node=True, capabilities=("write",), needs=("ai",))
def text_to_speech(params: TextToSpeechParams, context: ActionContext) -> BinaryOutput:
    data = get_ai_client().text_to_speech(params.text, params.voice, params.format)
    if not data:
        raise ActionError("the AI provider returned no audio")
    return _binary_result(context, data, AUDIO_MIME[params.format], params.save_as)


class SpeechToTextParams(ActionParams):
    path: str | None = Field(None, description="Path of the audio file in this workspace's files.")
    audio_base64: str | None = Field(None, description="The audio as base64, instead of a path.")
    filename: str = Field("audio.mp3", min_length=1, max_length=200,
                          description="File name telling the audio format (mp3, wav, m4a, ogg, webm, flac) "
                                      "of audioBase64.")
    language: str | None = Field(None, pattern=r"^[a-z]{2}$", description="ISO 639-1 code of the speech, if known.")

    @model_validator(mode="after")
    def _one_source(self) -> SpeechToTextParams:
        if bool(self.path) == bool(self.audio_base64):
            raise ValueError("give exactly one of path and audioBase64")
        return self


class SpeechToTextOutput(_Output):
    text: str


@action("ai.speechToText", toolbox="ai", label="Speech to text",
        description="Transcribe an audio file (a file path or base64) to text.",
        params=SpeechToTextParams, output=SpeechToTextOutput, graph_node=True, needs=("ai",))
def speech_to_text(params: SpeechToTextParams, context: ActionContext) -> SpeechToTextOutput:
    if params.path:
        data, _mime, name = _read_stored(context, params.path, MAX_AUDIO_BYTES)
    else:
        data, _mime = _decode_base64(params.audio_base64 or "", "audioBase64", MAX_AUDIO_BYTES)
        name = params.filename
    return SpeechToTextOutput(text=get_ai_client().speech_to_text(data, name, params.language).strip())


# --- neutralisation --------------------------------------------------------------------------


class NeutralizeDataParams(ActionParams):
    text: str = Field(min_length=1, max_length=MAX_TEXT, description="The text to neutralise.")
    names: list[str] = Field([], description="Names of people to replace, besides the configured ones.")
    kinds: list[Kind] | None = Field(None, description="Which kinds to replace; default: all "
                                                       "(EMAIL, IBAN, AHV, PHONE, PERSON).")


class NeutralizeOutput(_Output):
    text: str | None = None
    data: Any = None
    mapping: dict[str, str] = Field(description="Placeholder → original, to restore the results later.")
    found: dict[str, int] = Field({}, description="How many values of each kind were replaced.")


@action("ai.neutralizeData", toolbox="ai", label="Neutralise personal data",
        description="Replace personal data in a text (e-mail addresses, phone numbers, IBANs, AHV numbers, "
                    "listed names) by placeholders such as [EMAIL_1], and return the mapping to restore them.",
        params=NeutralizeDataParams, output=NeutralizeOutput)
def neutralize_data_action(params: NeutralizeDataParams, context: ActionContext) -> NeutralizeOutput:
    done = neutralize(params.text, params.names, kinds=params.kinds)
    return NeutralizeOutput(text=done.text, mapping=done.mapping, found=done.found)


class ContextNeutralizeParams(ActionParams):
    mode: Literal["neutralize", "restore"] = Field("neutralize", description="Replace personal data, or put "
                                                                            "the originals of mapping back.")
    text: str | None = Field(None, max_length=MAX_TEXT, description="A text.")
    data: Any = Field(None, description="JSON data whose strings are processed (instead of text).")
    names: list[str] = Field([], description="Names of people to replace, besides the configured ones.")
    kinds: list[Kind] | None = Field(None, description="Which kinds to replace; default: all.")
    mapping: dict[str, str] | None = Field(None, description="An earlier mapping: continued when neutralising, "
                                                             "required when restoring.")

    @model_validator(mode="after")
    def _one_input(self) -> ContextNeutralizeParams:
        if (self.text is None) == (self.data is None):
            raise ValueError("give exactly one of text and data")
        if self.mode == "restore" and self.mapping is None:
            raise ValueError("restoring needs the mapping of the neutralisation")
        return self


@action("context.neutralize", toolbox="ai", label="Neutralise data",
        description="Replace personal data (e-mail, phone, IBAN, AHV, listed names) in a text or JSON data by "
                    "stable placeholders and output the mapping; with mode 'restore', put the originals back.",
        params=ContextNeutralizeParams, output=NeutralizeOutput, agent_tool=False, graph_node=True)
def context_neutralize(params: ContextNeutralizeParams, context: ActionContext) -> NeutralizeOutput:
    if params.mode == "restore":
        mapping = params.mapping or {}
        if params.text is not None:
            return NeutralizeOutput(text=restore(params.text, mapping), mapping=mapping)
        return NeutralizeOutput(data=restore_data(params.data, mapping), mapping=mapping)
    if params.text is not None:
        done = neutralize(params.text, params.names, params.mapping, params.kinds)
        return NeutralizeOutput(text=done.text, mapping=done.mapping, found=done.found)
    data, mapping, found = neutralize_data(params.data, params.names, params.mapping, params.kinds)
    return NeutralizeOutput(data=data, mapping=mapping, found=found)


# --- general AI nodes ------------------------------------------------------------------------


class AiTextOutput(_Output):
    text: str
    data: Any = Field(None, description="The answer parsed as JSON, when responseFormat is json.")
    model: str
    usage: dict[str, int] = {}


def _as_prompt_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=2, default=str)


def _text_output(reply: AiReply, response_format: str) -> AiTextOutput:
    text = _ai_text(reply)
    data = parse_json_reply(text) if response_format == "json" else None
    return AiTextOutput(text=text, data=data, model=reply.model, usage=reply.usage)


class ProcessParams(ActionParams):
    prompt: str = Field(min_length=1, max_length=MAX_TEXT, description="The instruction: what to do with the input.")
    input: Any = Field(None, description="Text or JSON data to process, e.g. the output of an earlier step.")
    files: list[str] = Field([], max_length=20,
                             description="Paths of files in this workspace's file store (e.g. an e-mail step's "
                                         "`files`) whose text (text, PDF and DOCX files) the model reads too.")
    system_prompt: str | None = Field(None, max_length=20_000, description="Role and rules for the model.")
    response_format: Literal["text", "json"] = Field("text", description="json: the answer is parsed into data.")
    model: str | None = Field(None, description="Model id; default: the configured one.")
    temperature: float | None = Field(None, ge=0, le=2)


def _files_prompt(context: ActionContext, paths: list[str], budget: int) -> str:
    """The text of the files at `paths` as <file> blocks (at most `budget` characters in all); a
    file without text (an image) is named as such; a missing one fails the step (NotFound)."""
    service = _file_service()
    if not paths:
        return ""
    if service is None or context.feature_instance_id is None:
        raise ActionError("reading files needs the file store of a workspace, which this step does not have")
    blocks = []
    for path in paths:
        if budget <= 0:
            blocks.append(f'<file path="{path}">(left out: the text of the files is longer than this step '
                          "takes)</file>")
            continue
        try:
            read = service.read_text(context, path.strip(), 0, min(budget, service.MAX_READ_CHARS))
        except service.NotText as exc:
            blocks.append(f'<file path="{path}">({exc})</file>')
            continue
        budget -= len(read.text)
        cut = " (cut)" if read.truncated else ""
        blocks.append(f'<file path="{read.file.path}" type="{read.file.mime_type}">{cut}\n{read.text}\n</file>')
    return "\n\n" + "\n".join(blocks)


@action("ai.process", toolbox="ai", label="AI: process",
        description="Apply an instruction to the input of the step and to the text of files (classify, rewrite, "
                    "extract, answer) and return the model's text, or JSON data with responseFormat json.",
        params=ProcessParams, output=AiTextOutput, agent_tool=False, graph_node=True, needs=("ai",))
def process(params: ProcessParams, context: ActionContext) -> AiTextOutput:
    prompt = params.prompt
    if params.input is not None:
        prompt += f"\n\n<input>\n{_as_prompt_text(params.input)}\n</input>"
    prompt += _files_prompt(context, params.files, MAX_TEXT - len(prompt))
    if params.response_format == "json" and "json" not in prompt.lower():
        prompt += "\n\nAnswer with one JSON object."
    reply = get_ai_client().chat(prompt, model=params.model, system=params.system_prompt,
                                 response_format=params.response_format, temperature=params.temperature)
    return _text_output(reply, params.response_format)


class GenerateParams(ActionParams):
    prompt: str = Field(min_length=1, max_length=MAX_TEXT, description="What to write.")
    format: Literal["text", "markdown", "html", "json"] = Field("text", description="Form of the result.")
    max_words: int | None = Field(None, ge=1, le=20_000, description="Longest result in words.")
    language: str | None = Field(None, description="Language to write in.")
    system_prompt: str | None = Field(None, max_length=20_000, description="Role and rules for the model.")
    model: str | None = Field(None, description="Model id; default: the configured one.")
    temperature: float | None = Field(None, ge=0, le=2)


_FORMAT_RULES = {
    "text": "Answer in plain text without Markdown.",
    "markdown": "Answer in Markdown.",
    "html": "Answer with an HTML fragment (no <html> or <body>), no Markdown fences.",
    "json": "Answer with one JSON object.",
}


@action("ai.generate", toolbox="ai", label="AI: generate",
        description="Write new content (a text, e-mail, description, JSON) from an instruction.",
        params=GenerateParams, output=AiTextOutput, agent_tool=False, graph_node=True, needs=("ai",))
def generate(params: GenerateParams, context: ActionContext) -> AiTextOutput:
    rules = [_FORMAT_RULES[params.format]]
    if params.max_words:
        rules.append(f"Use at most {params.max_words} words.")
    if params.language:
        rules.append(f"Write in {params.language}.")
    system = "You write content for the user. Answer with the content only, no preamble. " + " ".join(rules)
    if params.system_prompt:
        system = params.system_prompt + "\n\n" + system
    response_format = "json" if params.format == "json" else "text"
    reply = get_ai_client().chat(params.prompt, model=params.model, system=system, response_format=response_format,
                                 temperature=params.temperature)
    return _text_output(reply, response_format)


class TranslateParams(ActionParams):
    text: str = Field(min_length=1, max_length=MAX_TEXT, description="The text to translate.")
    target_language: str = Field(min_length=2, max_length=50, description="Language to translate into, e.g. "
                                                                          "'English' or 'fr'.")
    source_language: str | None = Field(None, max_length=50, description="Language of the text, if known.")
    model: str | None = Field(None, description="Model id; default: the configured one.")


class TranslateOutput(_Output):
    text: str
    target_language: str
    model: str


def translate_text(text: str, target_language: str, source_language: str | None = None,
                   model: str | None = None) -> tuple[str, str]:
    """Translate with the configured model; returns (translation, model)."""
    source = f" from {source_language}" if source_language else ""
    system = (f"You are a professional translator. Translate the user's text{source} into {target_language}. "
              "Keep meaning, tone, formatting (Markdown, line breaks), names, numbers and placeholders such as "
              "[EMAIL_1] unchanged. Answer with the translation only.")
    reply = get_ai_client().chat([{"role": "user", "content": text}], model=model, system=system)
    return _ai_text(reply), reply.model


@action("ai.translate", toolbox="ai", label="AI: translate",
        description="Translate a text into another language, keeping formatting, names and numbers.",
        params=TranslateParams, output=TranslateOutput, agent_tool=False, graph_node=True, needs=("ai",))
def translate(params: TranslateParams, context: ActionContext) -> TranslateOutput:
    text, model = translate_text(params.text, params.target_language, params.source_language, params.model)
    return TranslateOutput(text=text, target_language=params.target_language, model=model)


# --- web research ----------------------------------------------------------------------------


class WebResearchParams(ActionParams):
    question: str = Field(min_length=3, max_length=2000, description="What to find out.")
    max_sources: int = Field(3, ge=1, le=8, description="How many search results to read (default 3).")
    language: str | None = Field(None, description="Language of the answer; default: the question's.")
    search_language: str | None = Field(None, pattern=r"^(all|auto|[a-z]{2,3}(-[A-Za-z]{2})?)$",
                                        description="Language code for the search results, e.g. 'de'.")


class Source(_Output):
    title: str
    url: str
    used: bool = Field(description="True when the page could be read and went into the answer.")
    error: str | None = None


class WebResearchOutput(_Output):
    answer: str
    sources: list[Source]
    model: str


RESEARCH_SYSTEM = ("You answer questions from the web sources given to you. Use only what they say, cite them as "
                   "[1], [2] … after the statements they support, and say plainly when the sources do not answer "
                   "the question.")
SOURCE_CHARS = 6_000  # text of one page given to the model


def _run_sub_action(action_id: str, params: dict[str, Any], context: ActionContext) -> Any:
    from backend.actions.executor import execute_action
    from backend.actions.registry import get_registry

    if get_registry().get(action_id) is None:
        raise ActionError(f"web research needs {action_id}, which is not available here")
    result = execute_action(action_id, params, context)
    if not result.ok:
        raise ActionError(f"{action_id}: {result.error}")
    return result.output


@action("ai.webResearch", toolbox="ai", label="AI: web research",
        description="Search the web for a question, read the best pages and answer with cited sources.",
        params=WebResearchParams, output=WebResearchOutput, agent_tool=False, graph_node=True,
        capabilities=("read", "externalSend"), needs=("ai", "webSearch"))
def web_research(params: WebResearchParams, context: ActionContext) -> WebResearchOutput:
    search_params: dict[str, Any] = {"query": params.question, "limit": params.max_sources}
    if params.search_language:
        search_params["language"] = params.search_language
    found = _run_sub_action("core.webSearch", search_params, context)
    hits = found.get("results", []) if isinstance(found, dict) else []
    if not hits:
        raise ActionError(f"the web search found nothing for '{params.question}'")
    sources: list[Source] = []
    excerpts: list[str] = []
    for hit in hits[: params.max_sources]:
        url, title = str(hit.get("url", "")), str(hit.get("title") or hit.get("url", ""))
        try:
            page = _run_sub_action("core.readUrl", {"url": url, "maxChars": SOURCE_CHARS}, context)
        except ActionError as exc:
            sources.append(Source(title=title, url=url, used=False, error=str(exc)))
            continue
        text = str(page.get("text", "")) if isinstance(page, dict) else str(page)
        if not text.strip():
            sources.append(Source(title=title, url=url, used=False, error="the page has no readable text"))
            continue
        sources.append(Source(title=page.get("title") or title, url=url, used=True))
        excerpts.append(f"[{len(excerpts) + 1}] {sources[-1].title} — {url}\n{text[:SOURCE_CHARS]}")
    if not excerpts:
        snippets = [f"[{i + 1}] {h.get('title', '')} — {h.get('url', '')}\n{h.get('snippet', '')}"
                    for i, h in enumerate(hits[: params.max_sources])]
        excerpts = snippets  # no page could be read: answer from the search snippets
    language = f" Answer in {params.language}." if params.language else " Answer in the language of the question."
    prompt = (f"Question: {params.question}\n\nSources:\n\n" + "\n\n".join(excerpts) + f"\n\n{language.strip()}")
    reply = get_ai_client().chat(prompt, system=RESEARCH_SYSTEM)
    return WebResearchOutput(answer=_ai_text(reply), sources=sources, model=reply.model)


# --- context nodes ---------------------------------------------------------------------------


class ExtractField(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=100)
    type: Literal["string", "number", "integer", "boolean", "array", "object"] = "string"
    description: str | None = None
    required: bool = False


class ExtractParams(ActionParams):
    text: str = Field(min_length=1, max_length=MAX_TEXT, description="The text to pull the fields from.")
    schema_: dict[str, Any] | None = Field(None, alias="schema", description="JSON Schema of the object to extract "
                                                                            "(type object with properties).")
    fields: list[ExtractField] | None = Field(None, description="The fields to extract, instead of a schema.")
    instructions: str | None = Field(None, max_length=5000, description="Extra hints, e.g. date formats.")
    model: str | None = Field(None, description="Model id; default: the configured one.")

    @model_validator(mode="after")
    def _schema_or_fields(self) -> ExtractParams:
        if (self.schema_ is None) == (self.fields is None):
            raise ValueError("give exactly one of schema and fields")
        if self.schema_ is not None and not isinstance(self.schema_.get("properties"), dict):
            raise ValueError("schema must be a JSON Schema object with properties")
        if self.fields is not None and not self.fields:
            raise ValueError("fields must name at least one field")
        return self

    def json_schema(self) -> dict[str, Any]:
        if self.schema_ is not None:
            return {"type": "object", **self.schema_}
        properties = {}
        for f in self.fields or []:
            properties[f.name] = {"type": [f.type, "null"], **({"description": f.description} if f.description else {})}
        return {"type": "object", "properties": properties,
                "required": [f.name for f in self.fields or [] if f.required]}


class ExtractOutput(_Output):
    data: dict[str, Any]
    missing: list[str] = Field(description="Required fields the text did not contain.")
    invalid: list[str] = Field(description="Fields whose value does not have the declared type.")
    model: str


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "number": (int, float), "integer": (int,), "boolean": (bool,), "array": (list,),
    "object": (dict,), "null": (type(None),),
}


def _type_ok(value: Any, declared: Any) -> bool:
    types = declared if isinstance(declared, list) else [declared]
    for name in types:
        allowed = _JSON_TYPES.get(name)
        if allowed is None:
            return True  # a type we do not check
        if isinstance(value, bool) and name in ("number", "integer"):
            continue
        if isinstance(value, allowed):
            return True
    return False


@action("context.extract", toolbox="ai", label="Extract fields",
        description="Pull structured fields (a JSON Schema or a list of fields) out of a text with the AI model.",
        params=ExtractParams, output=ExtractOutput, agent_tool=False, graph_node=True, needs=("ai",))
def extract(params: ExtractParams, context: ActionContext) -> ExtractOutput:
    schema = params.json_schema()
    properties: dict[str, Any] = schema.get("properties", {})
    system = ("You extract data from texts. Answer with one JSON object that follows this JSON Schema:\n"
              f"{json.dumps(schema, ensure_ascii=False)}\n"
              "Use null for every value the text does not contain; never guess or invent values.")
    if params.instructions:
        system += "\n" + params.instructions
    reply = get_ai_client().chat(f"<text>\n{params.text}\n</text>", model=params.model, system=system,
                                 response_format="json")
    answer = parse_json_reply(reply.text)
    if not isinstance(answer, dict):
        raise ActionError(f"the AI model answered with JSON that is not an object: {reply.text[:200]!r}")
    data = {name: answer.get(name) for name in properties} if properties else answer
    missing = [name for name in schema.get("required", []) if data.get(name) in (None, "")]
    invalid = [f"{name}: expected {spec.get('type')}" for name, spec in properties.items()
               if data.get(name) is not None and "type" in spec and not _type_ok(data[name], spec["type"])]
    return ExtractOutput(data=data, missing=missing, invalid=invalid, model=reply.model)


class TransformParams(ActionParams):
    data: Any = Field(None, description="The input data (any JSON), e.g. the output of an earlier step.")
    template: str | None = Field(None, max_length=200_000,
                                 description="Jinja2 template rendered over the data ({{ data.x }}, or {{ x }} "
                                             "for the keys of an object).")
    mapping: dict[str, Any] | None = Field(None, description="Target field → path into the data (customer.name, "
                                                             "items[0].price) or one {{ expression }}.")
    defaults: dict[str, Any] | None = Field(None, description="Values for mapped fields whose path is absent.")
    output: Literal["text", "json"] = Field("text", description="For templates: json parses the rendered text.")

    @model_validator(mode="after")
    def _template_or_mapping(self) -> TransformParams:
        if (self.template is None) == (self.mapping is None):
            raise ValueError("give exactly one of template and mapping")
        return self


class TransformOutput(_Output):
    result: Any
    missing: list[str] = Field([], description="Mapped fields whose path was absent (no default).")


@action("context.transform", toolbox="ai", label="Transform data",
        description="Reshape data without AI: render a sandboxed Jinja2 template or map fields to paths and "
                    "expressions. Deterministic.",
        params=TransformParams, output=TransformOutput, agent_tool=False, graph_node=True,
        raw_parameters=("template", "mapping"))
def transform(params: TransformParams, context: ActionContext) -> TransformOutput:
    try:
        if params.mapping is not None:
            result, missing = apply_mapping(params.data, params.mapping, params.defaults)
            return TransformOutput(result=result, missing=missing)
        text = render_template(params.template or "", params.data)
    except TransformError as exc:
        raise ActionError(str(exc)) from None
    if params.output == "json":
        try:
            return TransformOutput(result=json.loads(text))
        except json.JSONDecodeError as exc:
            raise ActionError(f"the rendered template is not valid JSON ({exc.msg} at line {exc.lineno}, "
                              f"column {exc.colno})") from None
    return TransformOutput(result=text)


# --- files -----------------------------------------------------------------------------------


class CreateFileParams(ActionParams):
    path: str = Field(min_length=1, max_length=1000, description="Path of the new file, e.g. 'reports/summary.md'.")
    content: str = Field(max_length=50_000_000, description="The content: text, or base64 with encoding base64.")
    encoding: Literal["text", "base64"] = Field("text", description="How content is given.")
    mime_type: str | None = Field(None, description="MIME type; default: from the file name.")
    overwrite: bool = Field(False, description="Replace an existing file at path.")


class CreateFileOutput(_Output):
    path: str
    name: str
    mime_type: str
    size_bytes: int
    stored: bool = Field(description="False when there is no file store: the content is then returned.")
    id: str | None = None
    content: str | None = None


@action("file.create", toolbox="ai", label="Create file",
        description="Create a file in the workspace's files from text or base64 content.",
        params=CreateFileParams, output=CreateFileOutput, agent_tool=False, graph_node=True,
        capabilities=("write",))
def create_file(params: CreateFileParams, context: ActionContext) -> CreateFileOutput:
    if params.encoding == "base64":
        data, _ = _decode_base64(params.content, "content", 50 * 1024 * 1024)
    else:
        data = params.content.encode("utf-8")
    name = params.path.rstrip("/").rsplit("/", 1)[-1]
    if not name:
        raise ActionError("path must end in a file name")
    mime = params.mime_type or mimetypes.guess_type(name)[0] or (
        "text/plain" if params.encoding == "text" else "application/octet-stream")
    if _file_service() is None or context.feature_instance_id is None:
        return CreateFileOutput(path=params.path, name=name, mime_type=mime, size_bytes=len(data), stored=False,
                                content=params.content)
    stored = _write_stored(context, params.path, data, mime, params.overwrite)
    return CreateFileOutput(path=stored.get("path", params.path), name=name, mime_type=mime, size_bytes=len(data),
                            stored=True, id=stored.get("id"))
