"""Which installed packages' source may be trained on, and under what licence.

The shipped weights are MIT-licensed, so they are trained only on code whose
licence clearly permits it without conditions that would follow the weights:
the standard library (PSF licence) and installed distributions under a
permissive licence (MIT, BSD, Apache-2.0, PSF, ISC ...).  Copyleft (GPL, LGPL,
MPL ...), proprietary, non-commercial and unknown licences are left out.  Every file in
site-packages is attributed to the distribution whose RECORD lists it, so a
file no distribution claims is left out too, and the training stats can list
each distribution trained on with its version and licence.

A distribution's licence is read from, in order: its SPDX `License-Expression`
(PEP 639), its `License ::` classifiers (all must be permissive), and its free
text `License` field (recognised by name).
"""

from __future__ import annotations

import re
import site
import sysconfig
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

# SPDX identifiers of licences that ask for no more than attribution.
PERMISSIVE_SPDX = frozenset(s.lower() for s in (
    "MIT", "MIT-0", "MIT-CMU", "X11", "0BSD", "BSD-2-Clause", "BSD-3-Clause",
    "BSD-3-Clause-Clear", "Apache-2.0", "Apache-1.1", "PSF-2.0", "Python-2.0",
    "Python-2.0.1", "CNRI-Python", "ISC", "Zlib", "Unlicense", "CC0-1.0", "BSL-1.0",
    "HPND", "NCSA", "UPL-1.0", "WTFPL",
))
# `License ::` classifier endings that name a permissive licence.
PERMISSIVE_CLASSIFIERS = (
    "MIT License", "MIT No Attribution License (MIT-0)", "BSD License",
    "Apache Software License", "Python Software Foundation License", "ISC License (ISCL)",
    "The Unlicense (Unlicense)", "zlib/libpng License", "Boost Software License 1.0 (BSL-1.0)",
    "Historical Permission Notice and Disclaimer (HPND)", "Universal Permissive License (UPL)",
    "CC0 1.0 Universal (CC0 1.0) Public Domain Dedication", "Public Domain",
)
# Free-text licence fields: a copyleft word anywhere rules the text out, else one of
# these names (or the first line of the BSD text) rules it in.  A version may follow a
# copyleft name directly (`GPLv3`, `LGPLv2.1+`, `MPL2`), which `\b` alone did not let
# match: "MIT and GPLv3" was read as permissive.  So may "ed" (`GPLed`), and a licence
# may be spelt out rather than abbreviated: "Affero General Public License", "Mozilla
# Public License 2.0" or "European Union Public Licence" named no acronym and were read
# as permissive beside "MIT" or "BSD".  The other copyleft families on the SPDX list
# (OSL, SSPL, CeCILL, Sleepycat, RPL, Creative Commons ShareAlike) are named too.  A
# text is only a fallback for distributions that declare neither an SPDX expression nor
# a classifier, so a false alarm costs one package's files; a miss would train MIT
# weights on copyleft code.
COPYLEFT_TEXT = re.compile(
    r"\b(A?GPL|LGPL|MPL|EUPL|CDDL|EPL|OSL|SSPL|RPL)(-?v?\d[\d.]*)?(ed)?(?![A-Za-z0-9_])"
    r"|\b(copyleft|GNU|Affero|CeCILL|Sleepycat|share-?alike|CC[- ]BY[- ](NC[- ])?SA)\b"
    r"|\b(General|Mozilla|Eclipse|European Union|Server Side|Reciprocal) Public Licen[cs]e"
    r"|\b(Open Software Licen[cs]e|Common Development and Distribution)\b", re.IGNORECASE)
# Text that takes back what a permissive name grants: "proprietary", a commercial
# licence required, non-commercial use only ("MIT; proprietary plug-ins", "MIT for
# non-commercial use" were read as permissive; so were "non commercial" with a space,
# the Commons Clause, which forbids selling, "commercial use prohibited", "academic use
# only", "not for resale" ...).  It rules a text out as copyleft does.
RESTRICTED_TEXT = re.compile(
    r"\bproprietary\b|\bnon[- ]?commercial\b|\bnot for commercial\b|\bCC[- ]BY[- ]NC\b"
    r"|\bCommons Clause\b|\bno commercial use\b|\bexcept (for )?commercial\b"
    r"|\bcommercial use (is )?(prohibited|forbidden|not (permitted|allowed))\b"
    r"|\b(academic|research|personal|educational|evaluation)( use| purposes)? only\b"
    r"|\bonly for (academic|research|personal|educational|evaluation)\b|\bnot for (re)?sale\b"
    r"|\bcommercial licen[cs]e (is )?required\b|\brequires? a commercial licen[cs]e\b",
    re.IGNORECASE)
# "All rights reserved" reserves what no licence grants: a text saying it beside only a
# licence's name ("Copyright Acme. All rights reserved. MIT") is ruled out.  It is also
# the copyright line of most BSD and MIT texts, followed by the grant itself, which
# keeps the text in: one of these sentences, as the permissive licences word them.
RESERVED_TEXT = re.compile(r"\ball rights reserved\b", re.IGNORECASE)
GRANT_TEXT = re.compile(
    r"Permission is hereby granted|Redistribution and use in source and binary forms"
    r"|Permission to use, copy, modify|Licensed under the Apache License"
    r"|Permission is granted to anyone|grants Licensee a nonexclusive", re.IGNORECASE)
PERMISSIVE_TEXT = re.compile(
    r"\b(MIT|BSD|Apache|PSF|Python Software Foundation|ISC|zlib|Unlicense|CC0)\b"
    r"|Redistribution and use in source and binary forms", re.IGNORECASE)


@dataclass(frozen=True)
class Distribution:
    """An installed distribution as the training stats report it."""

    name: str
    version: str
    licence: str  # as declared: SPDX expression, classifiers, or the text's first line
    permissive: bool


SPDX_TOKEN = re.compile(r"[()]|[^\s()]+")
OPERATORS = ("AND", "OR", "WITH", "and", "or", "with")  # SPDX: all upper or all lower case


def spdx_is_permissive(expression: str) -> bool:
    """True when the SPDX expression can be met with permissive licences alone.

    The expression is parsed with SPDX's grouping (parentheses first, then `WITH`,
    `AND`, `OR`): `OR` asks for any alternative, `AND` for every term.  Operators are
    all upper or all lower case (`mit or apache-2.0`), as SPDX 3.0.1 allows (Annex
    D.2: "letters must be all upper case or all lower case"; 2.3 asked for upper
    case); `Or` is no operator, so an expression holding it does not parse.  PyPA's
    `packaging` (26.4) reads any case (`MIT Or Apache-2.0` canonicalises to `MIT OR
    Apache-2.0`), but none of the 62 installed distributions with an expression on the
    2-core VM had a mixed-case operator (2026-12-03), and one that did would lose only
    its own files here.
    Reading `or` as a licence refused `mit or apache-2.0`, a permissive choice.
    Reading it with
    the parentheses dropped split `GPL-3.0-only AND (MIT OR Apache-2.0)` at its `OR`
    into `GPL-3.0-only AND MIT` or `Apache-2.0`, and so trained MIT weights on code
    whose every licensing needs the GPL.  `WITH` exceptions only ever add permissions,
    so the base licence decides.  An expression that does not parse is not permissive.
    """
    tokens = SPDX_TOKEN.findall(expression)
    at = 0

    def peek() -> str | None:
        return tokens[at] if at < len(tokens) else None

    def take() -> str:
        nonlocal at
        if at >= len(tokens):
            raise ValueError("expression ends early")
        at += 1
        return tokens[at - 1]

    def operator(name: str) -> bool:
        return peek() in (name, name.lower())

    def either() -> bool:  # terms joined by OR
        found = both()
        while operator("OR"):
            take()
            found = both() or found  # parse every alternative, so a malformed one fails
        return found

    def both() -> bool:  # terms joined by AND
        found = term()
        while operator("AND"):
            take()
            found = term() and found
        return found

    def term() -> bool:  # a licence (WITH an exception), or a parenthesised expression
        token = take()
        if token == "(":
            found = either()
            if take() != ")":
                raise ValueError("unbalanced parentheses")
            return found
        if token in (")", *OPERATORS):
            raise ValueError(f"unexpected {token}")
        if operator("WITH"):
            take()
            take()  # the exception's identifier
        return token.lower() in PERMISSIVE_SPDX

    try:
        permissive = either()
    except ValueError:
        return False
    return permissive and at == len(tokens)


def classify(meta: metadata.PackageMetadata) -> tuple[str, bool]:
    """(declared licence, whether it is permissive) from a distribution's metadata."""
    expression = (meta.get("License-Expression") or "").strip()
    if expression:
        return expression, spdx_is_permissive(expression)
    classifiers = [c.split("::")[-1].strip() for c in meta.get_all("Classifier") or []
                   if c.startswith("License ::")]
    classifiers = [c for c in classifiers if c != "OSI Approved"]
    if classifiers:
        return "; ".join(classifiers), all(c in PERMISSIVE_CLASSIFIERS for c in classifiers)
    text = (meta.get("License") or "").strip()
    if text and text.upper() != "UNKNOWN":
        first = text.splitlines()[0][:80]
        return first, text_is_permissive(text)
    return "unknown", False


def text_is_permissive(text: str) -> bool:
    """Whether a free-text licence field names a permissive licence and nothing that
    takes it back: no copyleft licence, no restriction, no rights reserved but granted."""
    if COPYLEFT_TEXT.search(text) or RESTRICTED_TEXT.search(text):
        return False
    if RESERVED_TEXT.search(text) and not GRANT_TEXT.search(text):
        return False
    return bool(PERMISSIVE_TEXT.search(text))


def site_packages_dirs() -> list[Path]:
    """The interpreter's site-packages (and Debian dist-packages) directories that exist."""
    found = list(site.getsitepackages()) if hasattr(site, "getsitepackages") else []
    found += [site.getusersitepackages(), sysconfig.get_paths()["purelib"],
              sysconfig.get_paths()["platlib"]]
    dirs: list[Path] = []
    for d in found:
        path = Path(d).resolve()
        if path.is_dir() and path not in dirs:
            dirs.append(path)
    return dirs


def python_files_by_distribution(root: Path) -> dict[str, Distribution]:
    """Root-relative posix path of every `.py` file a distribution installed under
    `root` -> that distribution."""
    owners: dict[str, Distribution] = {}
    for dist in metadata.distributions(path=[str(root)]):
        files = dist.files or []
        name = dist.metadata.get("Name") or "unknown"
        licence, permissive = classify(dist.metadata)
        info = Distribution(name, dist.version or "", licence, permissive)
        for f in files:
            rel = f.as_posix()
            if rel.endswith(".py") and not rel.startswith(".."):
                owners.setdefault(rel, info)
    return owners
