"""Reading the web safely: guarded page fetching, main-text extraction and web search.

Used by the core toolbox actions `core.readUrl` and `core.webSearch`; other actions (e.g. AI
web research) call the same functions. Failures raise :class:`WebError` with a plain message.
"""

from backend.web.extract import PageText, page_text
from backend.web.safe_fetch import FetchedPage, WebError, address_refusal, check_url, fetch
from backend.web.search import SearchHit, web_search

__all__ = [
    "FetchedPage", "PageText", "SearchHit", "WebError", "address_refusal", "check_url", "fetch", "page_text",
    "web_search",
]
