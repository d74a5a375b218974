"""Checking one entry of a job's ``runtime_env.pip``: exactly one PEP 508 requirement.

Ray writes the entries into a requirements file for ``pip install -r``, so an entry is
read with that file's rules: line breaks (as :meth:`str.splitlines`), ``#`` comments,
backslash continuations, ``${NAME}`` expansion and ``-`` options (``--index-url``,
``-r`` ...). Any of them would let a job choose the index or read files and variables
it should not: only a requirement passes (name, extras, specifier, marker), and
``name @ https://...`` only where the tenant's policy allows direct URLs.
"""

from __future__ import annotations

import re

from packaging.requirements import InvalidRequirement, Requirement

MAX_REQUIREMENT = 200

PIP_OPTION = "pip options are not allowed: the platform chooses the package index"
DIRECT_URL = "direct URL references are not allowed unless your tenant's policy allows them"
DIRECT_URL_SCHEME = (
    "direct URL references must be https:// URLs (file paths and version-control URLs "
    "such as git+https:// are not allowed)"
)
NOT_A_REQUIREMENT = "not a requirement"

# A word that starts with a dash — ASCII or a Unicode lookalike (hyphen, en/em dash,
# minus sign) someone might paste or use to slip past a plain "-" check.
_DASHES = "-\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe63\uff0d"
_OPTION_RE = re.compile(rf"(?:^|[\s,;])[{_DASHES}]")
# Printable ASCII only: a requirement needs nothing else, and this keeps out every
# character pip would take as a line break (\n, \r, \x0b, \x0c, \x1c-\x1e, \x85,
# \u2028, \u2029), NUL, tabs and invisible lookalikes.
_PRINTABLE_RE = re.compile(r"^[\x20-\x7e]*$")
_COMMENT_RE = re.compile(r"(?:^|\s)#")
_BARE_LOCATION_RE = re.compile(r"^(?:[a-z][a-z0-9+.\-]*:|[./~\\])", re.IGNORECASE)
# pip installs a name with an archive's extension from the file of that name, if one
# exists where it runs; such names are valid PEP 508 but never a package on an index.
_ARCHIVE_SUFFIXES = (
    ".whl",
    ".zip",
    ".tar",
    ".tar.gz",
    ".tgz",
    ".tar.bz2",
    ".tbz",
    ".tar.xz",
    ".txz",
    ".tlz",
    ".tar.lz",
    ".tar.lzma",
)


def requirement_fault(entry: str, *, allow_direct_urls: bool = False) -> str:
    """Why ``entry`` may not be installed (a sentence starting with its kind), or ``""``."""
    text = entry.strip()
    fault = _text_fault(text)
    if fault:
        return fault
    try:
        requirement = Requirement(text)
    except InvalidRequirement as exc:
        return f"{NOT_A_REQUIREMENT}: {str(exc).splitlines()[0]}"
    if requirement.name.lower().endswith(_ARCHIVE_SUFFIXES):
        return f"{NOT_A_REQUIREMENT}: {requirement.name} names an archive file, not a package"
    if requirement.url is None:
        return ""
    if not allow_direct_urls:
        return DIRECT_URL
    if not requirement.url.startswith("https://"):
        return DIRECT_URL_SCHEME
    return ""


def _text_fault(text: str) -> str:
    """What pip would read as more (or other) than one requirement, before parsing."""
    if not text:
        return f"{NOT_A_REQUIREMENT}: the entry is empty"
    if len(text) > MAX_REQUIREMENT:
        return f"{NOT_A_REQUIREMENT}: at most {MAX_REQUIREMENT} characters"
    if _OPTION_RE.search(text):
        return PIP_OPTION
    if not _PRINTABLE_RE.match(text):
        return (
            f"{NOT_A_REQUIREMENT}: one requirement per entry, without line breaks, tabs, "
            "control or non-ASCII characters"
        )
    if _COMMENT_RE.search(text):
        return f"{NOT_A_REQUIREMENT}: comments (#) are not accepted"
    if "\\" in text:
        return f"{NOT_A_REQUIREMENT}: backslashes (line continuations) are not accepted"
    if "$" in text:
        return f"{NOT_A_REQUIREMENT}: environment variables ($) are not expanded here"
    if _BARE_LOCATION_RE.match(text):
        return (
            f"{NOT_A_REQUIREMENT}: a URL or path on its own; give a package name such as "
            "torch==2.4.0"
        )
    return ""
