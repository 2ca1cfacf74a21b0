"""Specification of dlm_lsp.span: the prefix / masked span / suffix layout and the head."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlm_lsp.models.tokenizer import Tokenizer
from dlm_lsp.span import (
    HEAD_MAX_CHARS,
    HEAD_TAIL_CHARS,
    HeadChain,
    SpanLayout,
    _last_pretoken_start,
    build_layout,
    head_only_positions,
    head_positions,
)

# prefixes whose last characters a byte-level BPE would merge with what follows
EDGE_PREFIXES = ["y = ret", "x = foo(", "def f():\n    ", "a = 1\n", "abc", "x  "]


@pytest.fixture(scope="module")
def tok(model_dir: Path) -> Tokenizer:
    """The small byte-level BPE of the session's tiny model (built once by `small_tokenizer`)."""
    return Tokenizer.from_file(model_dir / "tokenizer.json")


def _last_pretoken(tok: Tokenizer, text: str) -> str:
    pieces = tok.backend.pre_tokenizer.pre_tokenize_str(text)
    start, end = pieces[-1][1]
    return text[start:end]


# --- SpanLayout ---------------------------------------------------------------------------


def test_sequence_is_prefix_then_masks_then_suffix() -> None:
    layout = SpanLayout([5, 6], 3, [7])
    assert layout.sequence(1) == [5, 6, 1, 1, 1, 7]
    assert (layout.span_start, layout.span_end) == (2, 5)


# --- the head -----------------------------------------------------------------------------


@pytest.mark.parametrize("prefix", EDGE_PREFIXES)
def test_head_is_the_prefix_s_last_pre_token(tok: Tokenizer, prefix: str) -> None:
    layout = build_layout(tok, prefix, "\n", 4, 100)
    assert layout.head == _last_pretoken(tok, prefix)
    assert prefix.endswith(layout.head) and layout.head


@pytest.mark.parametrize(("prefix", "head"), [
    ("y = ret", " ret"),
    ("x = foo(", "("),
    ("def f():\n    ", "\n    "),
    ("a = 1\n", "\n"),
])
def test_head_at_typical_edges(tok: Tokenizer, prefix: str, head: str) -> None:
    assert build_layout(tok, prefix, "", 4, 100).head == head


@pytest.mark.parametrize("prefix", EDGE_PREFIXES + ["é = ret", "s = 'héllo wörld"])
def test_prefix_ids_and_head_reproduce_the_prefix(tok: Tokenizer, prefix: str) -> None:
    layout = build_layout(tok, prefix, "pass\n", 4, 1000)
    assert tok.decode(layout.prefix_ids) + layout.head == prefix


def test_head_is_character_based_even_after_non_ascii_text(tok: Tokenizer) -> None:
    layout = build_layout(tok, "é = ret", "", 4, 100)
    assert layout.head == " ret"


@pytest.mark.parametrize("prefix", EDGE_PREFIXES)
def test_span_grows_by_the_head_s_tokens(tok: Tokenizer, prefix: str) -> None:
    layout = build_layout(tok, prefix, "", 4, 100)
    assert layout.n_masked == 4 + len(tok.encode(layout.head))


@pytest.mark.parametrize("prefix", ["x = " + "[" * 20_000, "x = 1" + "\n" * 5_000 + "    "])
def test_a_pre_token_thousands_of_characters_long_moves_only_its_end(tok: Tokenizer,
                                                                    prefix: str) -> None:
    """Brackets nested 20,000 deep, or thousands of blank lines, are one pre-token: moved
    whole, its chain of tokens took minutes and gigabytes, and outgrew the span."""
    layout = build_layout(tok, prefix, "\n", 8, 300)
    assert layout.head == prefix[-HEAD_MAX_CHARS:]
    assert prefix.endswith(tok.decode(layout.prefix_ids) + layout.head)
    assert layout.n_masked <= 8 + HEAD_MAX_CHARS


def test_empty_prefix_has_no_head_and_no_prefix_ids(tok: Tokenizer) -> None:
    layout = build_layout(tok, "", "x = 1\n", 4, 100)
    assert (layout.prefix_ids, layout.head, layout.n_masked) == ([], "", 4)


def test_prefix_that_is_one_pre_token_moves_entirely_into_the_head(tok: Tokenizer) -> None:
    layout = build_layout(tok, "abc", "", 2, 100)
    assert (layout.prefix_ids, layout.head) == ([], "abc")


def test_move_head_false_keeps_the_head_empty_and_the_prefix_whole(tok: Tokenizer) -> None:
    layout = build_layout(tok, "y = ret", "urn\n", 4, 100, move_head=False)
    assert layout.head == ""
    assert layout.prefix_ids == tok.encode("y = ret")
    assert layout.n_masked == 4


def test_suffix_is_tokenized_whole(tok: Tokenizer) -> None:
    layout = build_layout(tok, "x = ", "1\nprint(x)\n", 3, 100)
    assert layout.suffix_ids == tok.encode("1\nprint(x)\n")


# --- context cropping ---------------------------------------------------------------------


LONG_PREFIX = "".join(f"value_{i} = compute({i})\n" for i in range(40))
LONG_SUFFIX = "".join(f"print(value_{i})\n" for i in range(40))


@pytest.mark.parametrize("max_context", [0, 1, 7, 30, 90])
def test_context_never_exceeds_max_context(tok: Tokenizer, max_context: int) -> None:
    layout = build_layout(tok, LONG_PREFIX, LONG_SUFFIX, 4, max_context)
    assert len(layout.prefix_ids) + len(layout.suffix_ids) <= max_context


def test_cropping_keeps_the_tokens_nearest_the_span(tok: Tokenizer) -> None:
    full = build_layout(tok, LONG_PREFIX, LONG_SUFFIX, 4, 10_000)
    cropped = build_layout(tok, LONG_PREFIX, LONG_SUFFIX, 4, 30)
    assert cropped.prefix_ids == full.prefix_ids[-len(cropped.prefix_ids):]
    assert cropped.suffix_ids == full.suffix_ids[:len(cropped.suffix_ids)]
    assert cropped.head == full.head and cropped.n_masked == full.n_masked


def test_long_prefix_and_suffix_share_the_budget_two_thirds_to_one_third(tok: Tokenizer) -> None:
    layout = build_layout(tok, LONG_PREFIX, LONG_SUFFIX, 4, 30)
    assert (len(layout.prefix_ids), len(layout.suffix_ids)) == (20, 10)


def test_short_prefix_leaves_the_rest_of_the_budget_to_the_suffix(tok: Tokenizer) -> None:
    layout = build_layout(tok, "x = 1\ny = ", LONG_SUFFIX, 4, 30)
    assert len(layout.prefix_ids) == len(tok.encode("x = 1\ny ="))
    assert len(layout.prefix_ids) + len(layout.suffix_ids) == 30


def test_short_suffix_leaves_the_rest_of_the_budget_to_the_prefix(tok: Tokenizer) -> None:
    layout = build_layout(tok, LONG_PREFIX, "\n", 4, 30)
    assert layout.suffix_ids == tok.encode("\n")
    assert len(layout.prefix_ids) == 29


def test_context_that_fits_is_kept_whole(tok: Tokenizer) -> None:
    layout = build_layout(tok, "x = 1\ny = ", "\nz = 3\n", 4, 1000)
    assert tok.decode(layout.prefix_ids) + layout.head == "x = 1\ny = "
    assert tok.decode(layout.suffix_ids) == "\nz = 3\n"


# --- tokens that may start the span -------------------------------------------------------


def test_head_chain_allows_covering_tokens_and_pieces_of_the_start() -> None:
    texts = ["", "r", "re", "ret", "return", "et", "x", " ret", "rex", "t"]
    assert sorted(HeadChain(texts, "ret").allowed(0, 3)) == [1, 2, 3, 4]


def test_head_chain_allows_a_piece_only_if_the_rest_still_fits() -> None:
    texts = ["r", "e", "t", "ret"]
    chain = HeadChain(texts, "ret")
    assert chain.allowed(0, 1) == [3]  # one position left: only a token covering all of it
    assert sorted(chain.allowed(0, 3)) == [0, 3]
    assert chain.min_tokens[0] == 1


def test_head_chain_never_allows_empty_texts() -> None:
    assert HeadChain(["", "", "a"], "a").allowed(0, 1) == [2]


def test_head_chain_advances_by_the_characters_a_token_reproduces() -> None:
    chain = HeadChain(["\n", "  ", "\n  ", "  x"], "\n    ")
    assert chain.advance(0, "\n  ") == 3
    assert chain.advance(3, "  x") == 5  # covers the rest and goes on with the fill


def test_head_no_chain_can_spell_is_not_reproducible() -> None:
    assert not HeadChain(["\ufffd", "a"], "é").reproducible
    assert HeadChain(["\ufffd", "a", "é"], "aé").reproducible


@pytest.mark.parametrize("head", [" ret", "(", "\n    ", "\n"])
def test_head_chain_with_the_real_vocabulary(tok: Tokenizer, head: str) -> None:
    texts = tok.token_texts
    allowed = HeadChain(texts, head, tok.sorted_texts).allowed(0, len(head))
    assert allowed, "the vocabulary can always start an ASCII head"
    for i in allowed:
        assert texts[i].startswith(head) or head.startswith(texts[i])
    rejected = set(range(len(texts))) - set(allowed)
    for i in rejected:
        t = texts[i]
        assert not t or not (t.startswith(head) or head.startswith(t))


def test_special_tokens_are_never_allowed_in_the_head(tok: Tokenizer) -> None:
    allowed = set(HeadChain(tok.token_texts, " ").allowed(0, 1))
    assert tok.token_id("<|mask|>") not in allowed
    assert tok.token_id("<|pad|>") not in allowed


def test_text_that_spells_a_special_token_stays_text(tok: Tokenizer) -> None:
    source = "marker = '<|mask|>'  # and <|pad|>\n"
    ids = tok.encode(source)
    assert tok.token_id("<|mask|>") not in ids and tok.token_id("<|pad|>") not in ids
    assert tok.decode(ids) == source


def test_a_huge_document_gives_the_layout_of_its_lines_near_the_span(tok: Tokenizer) -> None:
    line = "value = compute(alpha, beta) + 1  # a line of code\n"
    prefix, suffix = line * 20000 + "x = ", "\n" + line * 20000  # ~1 MB each side
    whole = build_layout(tok, prefix, suffix, 8, 300)
    near = build_layout(tok, prefix[-len(line) * 200:], suffix[:len(line) * 200], 8, 300)
    assert whole == near
    assert len(whole.prefix_ids) + len(whole.suffix_ids) == 300


# Pre-tokenizers of the families the server loads: GPT-2's byte level (the shipped model),
# line breaks split first (models trained since), Qwen2's regex (Dream, DiffuCoder, ...),
# and SentencePiece's metaspace.
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
               r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def _pre_tokenizers():
    from tokenizers import Regex
    from tokenizers import pre_tokenizers as pre

    from dlm_lsp.training.data import line_pre_tokenizer
    return {
        "byte-level": pre.ByteLevel(add_prefix_space=False),
        "line-breaks-apart": line_pre_tokenizer(),
        "qwen2": pre.Sequence([pre.Split(Regex(QWEN2_SPLIT), behavior="isolated"),
                               pre.ByteLevel(add_prefix_space=False, use_regex=False)]),
        "metaspace": pre.Metaspace(),
    }


class _Backend:
    def __init__(self, pre_tokenizer):
        self.backend = type("Backend", (), {"pre_tokenizer": pre_tokenizer})()


@pytest.mark.parametrize("name", sorted(_pre_tokenizers()))
def test_the_head_found_in_a_tail_is_the_one_the_whole_prefix_gives(name: str) -> None:
    """Only a tail of the prefix is pre-tokenized (a 10 MB document took seconds a fill);
    at any cut of real code, blank-line runs and long words included, the head is the
    same as pre-tokenizing everything before the cut."""
    pre = _pre_tokenizers()[name]
    source = Path(pytest.__file__).read_text(encoding="utf-8")
    text = ("\n\n\n\n" + " " * (HEAD_TAIL_CHARS * 3) + "x = 'héllo'\n" + "é" * 2000
            + "\n\t\tdef f():  \n" + source)
    cuts = sorted(set(range(0, len(text), 7)) | {len(text)} | set(range(0, 2 * HEAD_TAIL_CHARS)))
    tokenizer = _Backend(pre)
    for cut in cuts:
        prefix = text[:cut]
        pieces = pre.pre_tokenize_str(prefix)
        whole = pieces[-1][1][0] if pieces else len(prefix)
        assert _last_pretoken_start(tokenizer, prefix) == whole, (name, cut, prefix[-40:])


SHIPPED_TOKENIZER = Path(__file__).parent.parent / "dlm_lsp" / "weights" / "default" / (
    "tokenizer.json")


@pytest.mark.parametrize(("text", "head_only"), [
    (" n", 0),  # ` n` finishes the head ` ` and writes `n`: the fill's
    ("  x", 1),  # ` ` is the head's alone, ` x` the fill's
    (" é", 1),  # ` `, then two bytes of `é`: the first starts at the head's end
])
def test_only_tokens_that_spell_nothing_but_the_head_are_the_head_s(text, head_only):
    """What `used` leaves out of a fill's positions.  A byte token of `é` starts where
    the head ends and spells nothing there: it is the fill's (counted as the head's, a
    fill of `é` said it used 1 position of its 2)."""
    shipped = Tokenizer.from_file(SHIPPED_TOKENIZER)
    ids = shipped.encode(text)
    assert head_only_positions(shipped, ids, " ") == head_only
    assert head_only <= head_positions(shipped, ids, " ")
