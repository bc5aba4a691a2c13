"""Language tags: BCP-47 or ISO 639, checked and reduced with langcodes (not a hand-kept table).

`base_language` is the one function that reduces a tag to its language; providers, recognisers and the
pipeline all compare languages through it, so a tag that passes validation ('eng', 'EN', 'en_GB', 'pus') means
the same language everywhere.
"""

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


@functools.lru_cache(maxsize=4096)
def base_language(tag: str) -> str:
    """The shortest code for the language subtag, lower-cased.

    'en-US' -> 'en', 'eng' -> 'en', 'EN' -> 'en', 'en_GB' -> 'en', 'pus' -> 'ps', 'iw' -> 'he', 'zh-yue' -> 'yue',
    'cmn' -> 'cmn' (langcodes keeps individual languages apart from their macrolanguage). A tag langcodes cannot
    parse (espeak-ng's 'en-us-nyc') falls back to its first subtag.
    """
    import langcodes

    cleaned = tag.strip().replace("_", "-")
    try:
        language = langcodes.Language.get(langcodes.standardize_tag(cleaned)).language
    except ValueError:  # langcodes.LanguageTagError
        language = None
    return language or cleaned.split("-")[0].lower()
