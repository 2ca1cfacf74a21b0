"""Documents written with their span marked as ⟦⟧ (an insertion point), for the Python
checks' specifications."""

from __future__ import annotations

from dlm_lsp.config import InfillOptions
from dlm_lsp.engine import InfillRequest
from dlm_lsp.validation import ParsedDocument, Validation, parsed_document


def marked_document(marked: str, language: str = "python") -> tuple[ParsedDocument, int]:
    """The document `marked` stands for, parsed, and where its span (⟦⟧) is."""
    return parsed_document(marked.replace("⟦⟧", ""), language), marked.index("⟦⟧")


def marked_verdict(marked: str, fill: str, language: str = "python") -> Validation:
    """The check's verdict on `fill` at the span: its syntax, then its names and the rest
    of checkNames' checks."""
    document, at = marked_document(marked, language)
    return document.names_checked(at, at, fill, document.validate(at, at, fill))


def marked_judged(marked: str, fill: str, **settings) -> Validation:
    """The verdict a server with `settings` gives `fill` at the span, as a fill's pass
    judges it (`passes.judged`)."""
    from dlm_lsp.config import ServerConfig
    from dlm_lsp.passes import judged

    request = marked_request(marked)
    document = parsed_document(request.text, "python")
    return judged(document, request, fill, ServerConfig(**settings))


def marked_request(marked: str, **options) -> InfillRequest:
    """A fill asked at the span of the Python document `marked` stands for."""
    at = marked.index("⟦⟧")
    return InfillRequest(marked.replace("⟦⟧", ""), at, at, "python", "file:///marked.py",
                         InfillOptions(**options))
