"""The admin page's words: English message ids, translated through gettext catalogs.

The English text is the message id (``_("Clear")``), so a word can never collide with
anything else the way keys of a lookup table can (``t.clear`` on a dict is the dict's
method). Catalogs are ``locale/<lang>/LC_MESSAGES/admin.po`` inside the package, compiled
by Babel once per process; a message without a translation falls back to English. The page
follows the browser's language or the switch on the page; memory content is shown as the
user wrote it.
"""

from __future__ import annotations

import gettext
from functools import cache
from importlib import resources
from io import BytesIO

from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po

LANGS = ("en", "zh")
DOMAIN = "admin"


def catalog_path(lang: str) -> resources.abc.Traversable:
    return resources.files("gateway").joinpath(f"locale/{lang}/LC_MESSAGES/{DOMAIN}.po")


@cache
def translations(lang: str) -> gettext.NullTranslations:
    """The page's translations for ``lang`` (English: the message ids themselves)."""
    if lang not in LANGS or lang == "en":
        return gettext.NullTranslations()
    with catalog_path(lang).open("rb") as po:
        catalog = read_po(po, locale=lang, domain=DOMAIN)
    compiled = BytesIO()
    write_mo(compiled, catalog)
    compiled.seek(0)
    return gettext.GNUTranslations(compiled)


def N_(message: str) -> str:
    """Marks a message for extraction where it is defined; it is translated where shown."""
    return message


# Why the write gate refused a draft, by the reason it gives (gateway.memory.gate.REASONS).
GATE_REASONS = {
    "sensitive": N_(
        "it contains a secret or sensitive personal data, which the policy does not store "
        "(the sensitive part was removed from the text below)"
    ),
    "model_inference": N_("it is the model's inference, stored only after the user confirms it"),
    "one_time": N_(
        "it reads as a one-off request for this conversation, not something to remember "
        "(policy: one_time)"
    ),
    "unconfirmed": N_("its source is stored only after the user confirms it"),
    "duplicate": N_("the same memory is already stored"),
    "invalid": N_("a field is not valid"),
}
# What exactly made a draft invalid, when the page can tell.
INVALID_DETAILS = {
    "empty": N_("the content is empty"),
    "too_long": N_("the content is longer than {limit} characters"),
    "expiry_past": N_("the expiry date is not in the future"),
    "expiry_format": N_("the expiry must be a date written YYYY-MM-DD"),
    "type": N_("the type is not one of the policy's types"),
}


def pick_lang(cookie: str | None, accept_language: str | None) -> str:
    """The page language: the switch's cookie first, then the browser's first choice."""
    if cookie in LANGS:
        return str(cookie)
    first = (accept_language or "").split(",")[0].strip().lower()
    return "zh" if first.startswith("zh") else "en"
