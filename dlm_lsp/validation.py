"""Tree-sitter syntax validation of a candidate fill.

A diffusion model proposes text for a span; before the server offers it we parse the
document with the fill in place and ask whether the fill made the syntax *worse*.
Documents being edited are often broken already, so an error only counts against the
fill when no baseline explains it: the document with the span removed, or the original
document (the two are the same text for an insertion).

Errors are the outermost ERROR nodes plus the MISSING nodes outside them, compared as
character ranges of the candidate document, where the fill occupies [start, start+len(fill)):

* Away from the fill, an error is pre-existing when a baseline has one of the same kind
  starting at the same (shifted) place: recovery may resize distant damage, not move it.
* Touching the fill (blanks on the same line count as touching), an error is new unless
  the original document had the same damage -- same kind, same extent, same nested
  errors -- overlapping the replaced text: the fill then sits inside code that was
  already broken.  Damage that merely borders the hole is the fill's to repair, which
  also means an empty fill is invalid where the hole itself is incomplete (`x = |`).
"""

from __future__ import annotations

import importlib
import os
import threading
from dataclasses import dataclass
from typing import NamedTuple

from tree_sitter import Language, Node, Parser


@dataclass(frozen=True)
class Validation:
    """The verdict on one fill; `valid` is True when unchecked so a missing grammar never blocks."""

    checked: bool
    valid: bool
    language: str | None
    new_errors: tuple[tuple[int, int], ...] = ()
    reason: str = ""


# canonical name -> (grammar module, function returning the language capsule)
_GRAMMARS: dict[str, tuple[str, str]] = {
    "python": ("tree_sitter_python", "language"),
    "javascript": ("tree_sitter_javascript", "language"),
    "typescript": ("tree_sitter_typescript", "language_typescript"),
    "tsx": ("tree_sitter_typescript", "language_tsx"),
    "go": ("tree_sitter_go", "language"),
    "rust": ("tree_sitter_rust", "language"),
    "java": ("tree_sitter_java", "language"),
    "c": ("tree_sitter_c", "language"),
    "cpp": ("tree_sitter_cpp", "language"),
}
LANGUAGES: tuple[str, ...] = tuple(_GRAMMARS)

# LSP languageIds (and a few common aliases) -> canonical name; JSX is part of the
# JavaScript grammar, while TypeScript needs the separate TSX grammar for JSX.
_LANGUAGE_IDS: dict[str, str] = {
    **{name: name for name in LANGUAGES},
    "py": "python", "python3": "python",
    "js": "javascript", "jsx": "javascript", "javascriptreact": "javascript",
    "ts": "typescript", "typescriptreact": "tsx",
    "golang": "go", "rs": "rust",
    "c++": "cpp", "cxx": "cpp", "cuda-cpp": "cpp",
}

# .h is mapped to C: clients normally send a languageId, which takes precedence.
_EXTENSIONS: dict[str, str] = {
    ".py": "python", ".pyi": "python",
    ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascript",
    ".ts": "typescript", ".mts": "typescript", ".cts": "typescript", ".tsx": "tsx",
    ".go": "go", ".rs": "rust", ".java": "java",
    ".c": "c", ".h": "c",
    ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".hpp": "cpp", ".hh": "cpp",
}

# One parser per language, built on first use; a string records why a grammar failed to load.
_PARSERS: dict[str, Parser | str] = {}
# Parsers are not safe to share between threads, and the server may validate concurrently.
_LOCK = threading.Lock()


class _Error(NamedTuple):
    """An error node as a character range, so errors of different parses can be compared."""

    kind: str  # "ERROR" or "MISSING <type>"
    start: int
    end: int
    inner: tuple[tuple[str, int, int], ...]  # nested error nodes, the shape of the damage


def language_for(language_id: str | None, uri: str | None = None) -> str | None:
    """Canonical language from an LSP languageId, else from the uri/path extension, else None."""
    if language_id:
        canonical = _LANGUAGE_IDS.get(language_id.strip().lower())
        if canonical is not None:
            return canonical
    if uri:
        path = uri.split("?", 1)[0].split("#", 1)[0]
        name = path.replace("\\", "/").rsplit("/", 1)[-1]
        return _EXTENSIONS.get(os.path.splitext(name)[1].lower())
    return None


def _parser(language: str) -> Parser | str:
    """Build the parser lazily so importing this module never pays for nine grammars."""
    if language not in _PARSERS:
        module_name, function = _GRAMMARS[language]
        try:
            capsule = getattr(importlib.import_module(module_name), function)()
            _PARSERS[language] = Parser(Language(capsule))
        except (ImportError, AttributeError, ValueError) as exc:
            _PARSERS[language] = (
                f"grammar package {module_name!r} for {language!r} is missing or unusable: {exc}"
            )
    return _PARSERS[language]


def _error_nodes(node: Node, nested: bool) -> list[Node]:
    """ERROR/MISSING nodes at or below `node` (clean subtrees pruned via has_error), in order."""
    found: list[Node] = []
    stack = list(node.children) if nested else [node]
    while stack:
        child = stack.pop()
        broken = child.is_error or child.is_missing
        if broken:
            found.append(child)
        if child.has_error and (nested or not broken):
            stack.extend(child.children)
    return sorted(found, key=lambda n: (n.start_byte, n.end_byte))


def _kind(node: Node) -> str:
    """MISSING nodes are typed by the token that was expected, which makes them comparable."""
    return "ERROR" if node.is_error else f"MISSING {node.type}"


_CONTINUATION_BYTES = bytes(range(0x80, 0xC0))


def _char_offsets(data: bytes, byte_offsets: set[int]) -> dict[int, int]:
    """Map UTF-8 byte offsets to code-point offsets in one pass over the sorted offsets."""
    result: dict[int, int] = {}
    chars = previous = 0
    for offset in sorted(byte_offsets):
        # Every code point has exactly one byte that is not a continuation byte (0x80-0xBF).
        chars += len(data[previous:offset].translate(None, _CONTINUATION_BYTES))
        result[offset] = chars
        previous = offset
    return result


def _parse_errors(parser: Parser, text: str) -> list[tuple[_Error, tuple[int, int]]]:
    """Parse `text` and return each error as a char range plus its (line, character column)."""
    data = text.encode("utf-8", "surrogatepass")
    with _LOCK:
        tree = parser.parse(data)
    nodes = _error_nodes(tree.root_node, nested=False)
    inner = {node.id: _error_nodes(node, nested=True) for node in nodes}
    wanted = {node.start_byte - node.start_point[1] for node in nodes}  # line starts
    for node in nodes + [n for found in inner.values() for n in found]:
        wanted.update((node.start_byte, node.end_byte))
    if len(data) == len(text):  # pure ASCII: bytes are characters
        chars = {offset: offset for offset in wanted}
    else:
        chars = _char_offsets(data, wanted)
    errors: list[tuple[_Error, tuple[int, int]]] = []
    for node in nodes:
        shape = tuple((_kind(n), chars[n.start_byte], chars[n.end_byte]) for n in inner[node.id])
        error = _Error(_kind(node), chars[node.start_byte], chars[node.end_byte], shape)
        column = chars[node.start_byte] - chars[node.start_byte - node.start_point[1]]
        errors.append((error, (node.start_point[0], column)))
    return errors


class _Baseline(NamedTuple):
    """A parse of the document with `middle` characters where the candidate has the fill."""

    errors: list[_Error]
    middle: int


def _map(start: int, end: int, hole: int, middle: int, size: int) -> tuple[int, int] | None:
    """Move a baseline range into candidate coordinates; None if it ends in the replaced text."""
    if start >= hole + middle:  # after the replaced text (a zero-width error at an empty hole too)
        return start + size - middle, end + size - middle
    if end <= hole:
        return start, end
    if start <= hole and end >= hole + middle:  # covers the replaced text
        return start, end + size - middle
    return None


def _explains(old: _Error, error: _Error, touches: bool, hole: int, middle: int, size: int) -> bool:
    """Whether baseline error `old` is the same damage as candidate error `error`."""
    mapped = _map(old.start, old.end, hole, middle, size)
    if old.kind != error.kind or mapped is None:
        return False
    if not touches:
        # Away from the fill, recovery may carve up old damage differently: its start is enough.
        return mapped[0] == error.start
    # At the fill, only damage that overlapped the replaced text (or strictly enclosed an empty
    # hole), with the same extent and the same nested errors, is excused: the fill then sits
    # inside code that was already broken.  Merely touching the hole is not enough.
    if not (old.start < hole + middle and old.end > hole) or mapped != (error.start, error.end):
        return False
    inner: list[tuple[str, int, int]] = []
    for kind, start, end in old.inner:
        moved = _map(start, end, hole, middle, size)
        if moved is None:
            return False
        inner.append((kind, *moved))
    return tuple(inner) == error.inner


def _is_new(error: _Error, removed: _Baseline, original: _Baseline, hole: int, size: int,
            reach: tuple[int, int]) -> bool:
    """Whether the baselines fail to explain `error`; at the fill only the user's text can."""
    # Touching counts, even across blanks on the same line: an error that ends where the
    # fill starts is one the fill failed to close (`x = ` stays broken if the fill is empty).
    touches = error.start <= reach[1] and error.end >= reach[0]
    # Removing the span leaves artifacts at the hole, so only the original document can
    # vouch for damage there; away from the fill either parse may.
    bases = (original,) if touches else (removed, original)
    return not any(_explains(old, error, touches, hole, base.middle, size)
                   for base in bases for old in base.errors)


def validate_fill(text: str, start: int, end: int, fill: str, language: str | None) -> Validation:
    """Parse text[:start] + fill + text[end:] and report error nodes that the fill introduced."""
    if not 0 <= start <= end <= len(text):
        raise ValueError(f"span [{start}, {end}) is outside a document of {len(text)} characters")
    # LSP languageIds are accepted too, so callers may pass what the client sent.
    canonical = _LANGUAGE_IDS.get(language.strip().lower()) if language else None
    if canonical is None:
        reason = f"no grammar for language {language!r}" if language else "no language given"
        return Validation(False, True, None, reason=reason)
    parser = _parser(canonical)
    if isinstance(parser, str):
        return Validation(False, True, canonical, reason=parser)

    before, after = text[:start], text[end:]
    candidate = _parse_errors(parser, before + fill + after)
    if not candidate:  # the common case: no need to parse a baseline at all
        return Validation(True, True, canonical, reason="no syntax errors")
    # The document with the span removed, and the original document (what the user has);
    # for an insertion they are the same text, parsed once.
    removed = _Baseline([error for error, _ in _parse_errors(parser, before + after)], 0)
    original = removed
    if end > start:
        original = _Baseline([error for error, _ in _parse_errors(parser, text)], end - start)
    blanks_after = len(after) - len(after.lstrip(" \t"))
    reach = (len(before.rstrip(" \t")), start + len(fill) + blanks_after)
    new = sorted({where for error, where in candidate
                  if _is_new(error, removed, original, start, len(fill), reach)})
    if not new:
        return Validation(True, True, canonical,
                          reason=f"no new syntax errors ({len(candidate)} pre-existing ignored)")
    line, column = new[0]
    return Validation(True, False, canonical, tuple(new),
                      reason=f"fill introduces {len(new)} syntax error(s), first at "
                             f"line {line + 1}, column {column + 1}")
