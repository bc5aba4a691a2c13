"""Provider specs and the registries that build providers from them.

A spec string names a provider and its configuration: `provider[:voice][:key=value ...]`, for example
`piper:joe`, `espeak-ng:en-us`, `flite:slt`, `espeak-ng:en-us:speed=140`. It is parsed once into a frozen
`Spec`; `Spec.canonical` (options sorted) is what goes into rows, ids and cache keys.

A `Registry` holds lazy `"module:Class"` entries, so listing providers imports nothing heavy. Each registry is
typed by its kind's protocol (ttseval.core.protocols) and checks a provider against it: the class when it is
resolved, the instance when it is built. Before building, `check_available` reads the class's metadata
(`requires`, `imports`, `extra`) and refuses a missing program or package with a ConfigError naming what to
install, so a run fails in its first second instead of with a traceback.

This module is the mechanism; the entries live beside their providers (`ttseval/providers/<kind>/__init__.py`,
gathered in ttseval.providers.registries). A registry's entries are, in order: its built-in ones; those of
installed distributions, declared as entry points in the group `ttseval.<kind>` (`ttseval.quality`, ...), so a
plugin package needs no edit of ttseval nor any setting; and the `plugins` setting's. None may take another's
name for another class.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import importlib.metadata
import importlib.util
import inspect
import re
import shutil
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from ttseval.core.errors import ConfigError, MissingKeyError, SpecError, TTSEvalError
from ttseval.core.ids import stable_id
from ttseval.core.protocols import METADATA_DEFAULTS, Languages

T = TypeVar("T")
_OPTION = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*=")

# Options the pipeline reads from a system spec itself. `prompt=category`: strong prompting (EmergentTTS-Eval
# 4.1): the category's description goes to the provider as its instruction.
PIPELINE_OPTIONS = frozenset({"prompt"})
LABEL_OPTION = "label"
"""`label=NAME` names a system in tables, reports and alerts (`vllm:x:base_url=http://gpu7:8000/v1:label=ours-v3`
shows as `ours-v3`): not passed to the provider and not part of the system's id, so relabelling reuses its rows."""
SECRET_OPTIONS = frozenset({"api_key", "key", "token", "secret", "password", "apikey", "access_token"})
"""Option names refused in any spec: a spec is stored in rows and logs, so keys come from the environment."""


@dataclass(frozen=True)
class Spec:
    """A parsed provider spec. `options` values stay strings; the provider validates and converts them."""

    provider: str
    voice: str | None = None
    options: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    @classmethod
    def parse(cls, text: str) -> Spec:
        """Parse `provider[:voice][:key=value ...]`. A value runs until the next `:key=`, so it may hold ':'
        (`base_url=http://127.0.0.1:8080`); a voice may not (use the provider's `model=` option for such paths)."""
        raw = text.strip()
        if not raw:
            raise SpecError("empty provider spec; expected 'provider[:voice][:key=value]', e.g. 'piper:joe'", spec=text)
        provider, _, rest = raw.partition(":")
        if not provider:
            raise SpecError(f"spec {text!r} has no provider name before ':'", spec=text)
        tokens = re.split(r":(?=[A-Za-z_][A-Za-z0-9_.-]*=)", rest) if rest else []
        voice: str | None = None
        if tokens and not _OPTION.match(tokens[0]):
            voice = tokens.pop(0) or None
            if voice and ":" in voice:
                raise SpecError(f"spec {text!r}: more than one voice in {voice!r}; options need key=value", spec=text)
        options: dict[str, str] = {}
        for token in tokens:
            key, _, value = token.partition("=")
            if key in options:
                raise SpecError(f"spec {text!r}: option {key!r} given twice", spec=text)
            options[key] = value
        return cls(provider=provider, voice=voice, options=tuple(sorted(options.items())))

    @property
    def canonical(self) -> str:
        parts = [self.provider]
        if self.voice:
            parts.append(self.voice)
        parts.extend(f"{k}={v}" for k, v in self.options)
        return ":".join(parts)

    def option(self, name: str) -> str | None:
        return dict(self.options).get(name)

    @property
    def label(self) -> str | None:
        """The spec's `label=` (LABEL_OPTION), or None."""
        return self.option(LABEL_OPTION) or None

    @property
    def id(self) -> str:
        """Stable id: readable name plus a hash of provider, voice and options (not the engine version)."""
        return self.revised_id("")

    def revised_id(self, revision: str) -> str:
        """`id`, or, for a provider whose output changed without a change of spec (`output_revision`), an id that
        also hashes that revision, so rows made before the change are not taken for rows made after it."""
        readable = "-".join(p for p in (self.provider, self.voice) if p)
        options = {k: v for k, v in self.options if k != LABEL_OPTION}  # a name, not what makes the audio
        params = {"provider": self.provider, "voice": self.voice, "options": options}
        return stable_id(readable, params | ({"revision": revision} if revision else {}))

    def __str__(self) -> str:
        return self.canonical


def system_name(spec: str) -> str:
    """How a system is named to a reader: its spec's `label=`, or the spec itself (a stored spec that does not parse
    is shown as it is)."""
    try:
        return Spec.parse(spec).label or spec
    except SpecError:
        return spec


def _protocol_members(protocol: type) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """(methods, class attributes, instance attributes) that `protocol` and its protocol bases declare."""
    from typing import Generic, Protocol

    methods: set[str] = set()
    class_attrs: set[str] = set()
    instance_attrs: set[str] = set()
    for base in protocol.__mro__:
        if base in (Protocol, Generic, object) or not getattr(base, "_is_protocol", False):
            continue
        for attr, annotation in inspect.get_annotations(base).items():
            (class_attrs if "ClassVar" in str(annotation) else instance_attrs).add(attr)
        methods.update(a for a, v in base.__dict__.items() if not a.startswith("_") and callable(v))
    return frozenset(methods), frozenset(class_attrs), frozenset(instance_attrs)


def missing_program(program: str, *, needed_by: str) -> str:
    """The one-line message for a system program that is not on PATH (the apt package has the program's name)."""
    return f"{program} is not installed: apt-get install {program} (needed by {needed_by})"


def require_program(program: str, *, needed_by: str) -> str:
    """The path of `program` on PATH.

    Raises:
        ConfigError: it is not installed; the message names the apt package and who needs it.
    """
    path = shutil.which(program)
    if path is None:
        raise ConfigError(missing_program(program, needed_by=needed_by))
    return path


def _module_available(module: str) -> bool:
    """Whether `module` can be imported, found without importing it (a dotted name imports its parents only)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


@dataclass(frozen=True)
class ProviderInfo:
    """A provider class's declared metadata (ttseval.core.protocols.ProviderMetadata), read without building it.

    An attribute a plugin does not declare gets its METADATA_DEFAULTS value; built-in providers declare all.
    """

    kind: str
    name: str
    target: str
    cls: type
    languages: Languages
    accepts_instruction: bool
    gpu: bool
    extra: str | None
    output_sample_rate_hz: int | None
    requires: tuple[str, ...]
    imports: tuple[str, ...]

    @classmethod
    def of(cls, kind: str, name: str, target: str, provider: type) -> ProviderInfo:
        declared = {attr: getattr(provider, attr, default) for attr, default in METADATA_DEFAULTS.items()}
        return cls(kind=kind, name=name, target=target, cls=provider, **declared)

    @property
    def version(self) -> str:
        """The engine version the class reports (lazily: a package's metadata or the program's --version);
        'unknown' when it declares none, 'unavailable' when the engine is not installed."""
        try:
            return str(getattr(self.cls, "version", "unknown"))
        except (TTSEvalError, ImportError, OSError):
            return "unavailable"

    def language_codes(self) -> frozenset[str] | str:
        """The base language codes, asking the engine when `languages` is a function; ANY_LANGUAGE or PER_VOICE
        as declared; PER_VOICE when the function cannot run (the engine is missing)."""
        if callable(self.languages):
            try:
                return frozenset(self.languages())
            except (TTSEvalError, ImportError, OSError):
                return "per voice"
        return self.languages

    def missing_programs(self) -> list[str]:
        """The programs of `requires` that are not on PATH."""
        return [program for program in self.requires if shutil.which(program) is None]

    def missing_modules(self) -> list[str]:
        """The modules of `imports` that cannot be imported (found without importing them)."""
        return [module for module in self.imports if not _module_available(module)]

    def problems(self) -> list[str]:
        """One line per missing system program or Python package, naming what to install; [] when ready."""
        who = f"{self.kind} provider {self.name!r}"
        how = f"pip install 'ttseval[{self.extra}]'" if self.extra else "reinstall ttseval, which depends on it"
        return [missing_program(program, needed_by=who) for program in self.missing_programs()] + [
            f"Python package {module!r} is not installed: {how} (needed by {who})" for module in self.missing_modules()
        ]


class Registry(Generic[T]):
    """Named lazy entries of one kind of provider, typed by that kind's protocol.

    Args:
        kind: 'tts', 'asr', 'quality', 'lid', 'speaker', 'judge' or 'llm' (used in messages and in the `plugins`
            setting; REGISTRIES maps each to its registry).
        protocol: the runtime-checkable Protocol every entry implements; its methods and ClassVars are checked on
            the class when it is resolved, its other attributes on the instance when it is built.
        entries: built-in name -> "module:Class".
        any_of: protocols of which a provider must also implement at least one (a judge judges pairs,
            instructions or both).
    """

    def __init__(self, kind: str, protocol: type, entries: dict[str, str], *, any_of: tuple[type, ...] = ()) -> None:
        # `protocol` is a Protocol class, which type[T] would refuse (it is abstract); T comes from Registry[T](...)
        self.kind = kind
        self.protocol = protocol
        self.any_of = any_of
        self._members = _protocol_members(protocol)
        self._entries: dict[str, str] = {}
        for name, target in entries.items():
            self.register(name, target)

    def register(self, name: str, target: str) -> None:
        """Add `name` -> "module:Class". A name already taken raises, so two providers never share one."""
        if name in self._entries and self._entries[name] != target:
            raise SpecError(f"{self.kind} provider {name!r} is already registered as {self._entries[name]!r}")
        self._entries[name] = self._checked_target(name, target)

    def _checked_target(self, name: str, target: str) -> str:
        if ":" not in target:
            raise SpecError(f"{self.kind} provider {name!r}: target {target!r} must look like 'module:Class'")
        return target

    @property
    def names(self) -> list[str]:
        """The built-in names (without installed or configured plugins)."""
        return sorted(self._entries)

    @property
    def entry_point_group(self) -> str:
        """The entry-point group an installed plugin package declares its providers of this kind in."""
        return f"ttseval.{self.kind}"

    def installed(self) -> dict[str, str]:
        """The providers installed distributions declare as entry points (`entry_point_group`), name -> target.

        Raises:
            ConfigError: an installed plugin takes a built-in name, or two take one name, for another class.
        """
        return dict(_installed_entries(self.entry_point_group, tuple(sorted(self._entries.items())), self.kind))

    def entries(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """Built-in entries, those installed plugins declare (`installed`), and the `plugins` setting's.

        Raises:
            ConfigError: a plugin reuses a built-in's or an installed plugin's name for another class (it would
                silently replace it).
        """
        merged = dict(self._entries)
        for name, target in self.installed().items():
            merged[name] = self._checked_target(name, target)
        for name, target in (extra or {}).items():
            if name in merged and merged[name] != target:
                where = "built-in" if name in self._entries else "installed"
                raise ConfigError(
                    f"setting plugins.{self.kind}: {name!r} -> {target!r} reuses the name of the {where} {self.kind} "
                    f"provider {name!r} ({merged[name]}); give the plugin another name"
                )
            merged[name] = self._checked_target(name, target)
        return merged

    def output_id(self, spec: Spec, extra: dict[str, str] | None = None) -> str:
        """The id of what `spec` computes (a recogniser's or predictor's rows are keyed by it): `spec.id`, with the
        class's optional `output_revision` string hashed in when it declares one (see `Spec.revised_id`)."""
        return spec.revised_id(str(getattr(self.resolve(spec.provider, extra), "output_revision", "") or ""))

    def resolve(self, name: str, extra: dict[str, str] | None = None) -> type[T]:
        """The provider class for `name` (imports its module, not its engine), checked against the protocol.

        Raises:
            SpecError: an unknown name (with the closest names and all available ones), or a class that lacks a
                method or class attribute of the protocol.
            ConfigError: a plugin clashes with a built-in name, or its module or class cannot be imported.
        """
        entries = self.entries(extra)
        if name not in entries:
            close = difflib.get_close_matches(name, entries, n=3)
            hint = f"did you mean {', '.join(repr(c) for c in close)}? " if close else ""
            raise SpecError(
                f"unknown {self.kind} provider {name!r}; {hint}available: {', '.join(sorted(entries))}", spec=name
            )
        target = entries[name]
        module_name, _, class_name = target.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as e:
            raise ConfigError(f"{self.kind} provider {name!r}: cannot import {module_name!r} ({e})") from e
        cls = getattr(module, class_name, None)
        if not isinstance(cls, type):
            raise ConfigError(f"{self.kind} provider {name!r}: {module_name!r} has no class {class_name!r}")
        self._check_class(name, target, cls)
        return cls

    def _check_class(self, name: str, target: str, cls: type) -> None:
        methods, class_attrs, _ = self._members
        missing = [f"{m}()" for m in sorted(methods) if not callable(getattr(cls, m, None))]
        missing += [a for a in sorted(class_attrs) if a not in dir(cls)]
        if self.any_of:
            options = [sorted(_protocol_members(p)[0] - methods) for p in self.any_of]
            if not any(all(callable(getattr(cls, m, None)) for m in option) for option in options):
                missing.append(" or ".join(f"{m}()" for option in options for m in option))
        if missing:
            raise SpecError(
                f"{self.kind} provider {name!r} ({target}) does not implement {self.protocol.__name__}: "
                f"missing {', '.join(missing)}",
                spec=name,
            )

    def info(self, name: str, extra: dict[str, str] | None = None) -> ProviderInfo:
        """The declared metadata of provider `name`, read from its class without building it."""
        cls = self.resolve(name, extra)
        return ProviderInfo.of(self.kind, name, self.entries(extra)[name], cls)

    def check_available(self, spec: Spec | str, extra: dict[str, str] | None = None) -> None:
        """Refuse a provider whose system programs or Python packages are missing, before any work.

        Raises:
            ConfigError: one line per missing thing, naming what to install (apt-get or the pip extra).
        """
        parsed = Spec.parse(spec) if isinstance(spec, str) else spec
        problems = self.info(parsed.provider, extra).problems()
        if problems:
            raise ConfigError("; ".join(problems))

    def build(self, spec: Spec | str, extra: dict[str, str] | None = None, **context: Any) -> T:
        """Construct the provider for `spec`: `Class(voice=spec.voice, **options, **context)`.

        Programs and packages are checked first (check_available), the instance against the protocol after.
        Pipeline options (PIPELINE_OPTIONS, e.g. `prompt=category`) belong to the stage, not the provider, and
        are not passed on; they still make the spec, and so the system_id, different.

        Raises:
            SpecError: a bad option or voice, or an instance missing an attribute of the protocol.
            ConfigError: a missing program or package (see check_available), or one the provider found missing.
        """
        parsed = Spec.parse(spec) if isinstance(spec, str) else spec
        secret = [k for k, _ in parsed.options if k.lower() in SECRET_OPTIONS]
        if secret:  # the spec is written to rows, ids, logs and reports; a key never is
            raise SpecError(
                f"{self.kind} spec for {parsed.provider!r}: option {secret[0]!r} would put a secret in "
                "the spec, which is stored in every row; set the provider's API-key environment variable "
                "(or name a Prefect Secret block in the setting secret_blocks)",
                spec=parsed.provider,
            )
        self.check_available(parsed, extra)
        cls = self.resolve(parsed.provider, extra)
        settings_named = [k for k, _ in parsed.options if k in getattr(cls, "run_settings", ())]
        if settings_named:  # a spec is typed by whoever starts the run; these are the worker's to set
            raise SpecError(
                f"{self.kind} spec for {parsed.provider!r}: {settings_named[0]!r} is a setting of whoever runs the "
                "worker (ttseval.toml or TTSEVAL_*), not an option of a spec",
                spec=parsed.provider,
            )
        options = {k: v for k, v in parsed.options if k not in PIPELINE_OPTIONS and k != LABEL_OPTION}
        try:
            provider = cls(voice=parsed.voice, **options, **context)  # type: ignore[call-arg]
        except (TypeError, ValueError) as e:
            error = MissingKeyError if isinstance(e, MissingKeyError) else SpecError
            # a spec refused for holding a credential is named by its provider alone, never repeated
            shown = parsed.provider if "credentials" in str(e) else parsed.canonical
            raise error(f"{self.kind} spec {shown!r}: {e}", spec=shown) from None
        except ImportError as e:  # a package only this configuration needs (a bundled voice or model)
            raise ConfigError(f"{self.kind} spec {parsed.canonical!r}: {e}") from e
        missing = [a for a in sorted(self._members[2]) if not hasattr(provider, a)]
        if missing:
            raise SpecError(
                f"{self.kind} provider {parsed.provider!r} ({type(provider).__qualname__}) does not implement "
                f"{self.protocol.__name__}: its instance has no {', '.join(missing)}",
                spec=parsed.canonical,
            )
        return provider


@functools.cache
def _installed_entries(group: str, built_in: tuple[tuple[str, str], ...], kind: str) -> tuple[tuple[str, str], ...]:
    """The entry points of `group` as (name, target) pairs, read once per process (a scan of every installed
    distribution's metadata), checked against the built-in entries and each other."""
    found: dict[str, tuple[str, str]] = {}
    built = dict(built_in)
    for point in importlib.metadata.entry_points(group=group):
        package = point.dist.name if point.dist is not None else "an installed package"
        if point.name in built and built[point.name] != point.value:
            raise ConfigError(
                f"{package} declares the {kind} provider {point.name!r} -> {point.value!r} (entry point "
                f"group {group}), the name of a built-in one ({built[point.name]}); the plugin must "
                "use another name"
            )
        if point.name in found and found[point.name][0] != point.value:
            raise ConfigError(
                f"{package} and {found[point.name][1]} both declare the {kind} provider "
                f"{point.name!r} (entry point group {group}); uninstall one"
            )
        found[point.name] = (point.value, package)
    return tuple(sorted((name, target) for name, (target, _) in found.items()))
