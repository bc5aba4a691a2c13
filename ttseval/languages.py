"""Language tags: BCP-47 or ISO 639, checked and reduced with langcodes (not a hand-kept table)."""

from __future__ import annotations

import functools


@functools.lru_cache(maxsize=1024)
def is_known_language(tag: str) -> bool:
    """True for a well-formed tag whose language subtag is registered ('en', 'en-US', 'eng', 'ps-AF')."""
    import langcodes

    try:
        return bool(tag) and langcodes.tag_is_valid(tag) and langcodes.Language.get(tag).is_valid()
    except ValueError:
        return False


@functools.lru_cache(maxsize=1024)
def base_language(tag: str) -> str:
    """The shortest code for the language subtag: 'en-US' -> 'en', 'eng' -> 'en', 'pus' -> 'ps'."""
    import langcodes

    return langcodes.Language.get(langcodes.standardize_tag(tag)).language or tag.split("-")[0].lower()
