"""The registries: lazy entries typed by their kind's protocol, plugins that cannot shadow a built-in, provider
metadata read from the classes without building them, and missing programs or packages refused before any work."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.support.harness import ROOT
from ttseval.core.errors import ConfigError, SpecError
from ttseval.core.protocols import ANY_LANGUAGE, METADATA_DEFAULTS, PER_VOICE, TTSProvider
from ttseval.core.registry import Registry
from ttseval.core.telemetry import TELEMETRY_OFF
from ttseval.providers.asr import ASR
from ttseval.providers.judges import JUDGES
from ttseval.providers.llm import LLMS
from ttseval.providers.quality import QUALITY
from ttseval.providers.registries import REGISTRIES
from ttseval.providers.tts import TTS
from ttseval.providers.tts.espeak_ng import EspeakNGTTS
from ttseval.providers.tts.flite import FliteTTS

# -- lookup --------------------------------------------------------------------------------------------------------


def test_unknown_name_suggests_and_lists() -> None:
    with pytest.raises(SpecError) as unknown:
        TTS.resolve("pipr")
    assert str(unknown.value) == f"unknown tts provider 'pipr'; did you mean 'piper'? available: {', '.join(TTS.names)}"
    assert {"espeak-ng", "flite", "piper", "openai"} <= set(TTS.names)


def test_duplicate_name_raises_and_plugins_resolve() -> None:
    reg = Registry("tts", TTSProvider, {"a": "tests.support.fakes:FlakyTTS"})
    with pytest.raises(SpecError, match="already registered"):
        reg.register("a", "tests.other:Other")
    provider = TTS.build("flaky:beep", extra={"flaky": "tests.support.fakes:FlakyTTS"})
    assert provider.voice == "beep"


def test_bad_option_is_a_spec_error_naming_it() -> None:
    with pytest.raises(SpecError, match="loudness"):
        TTS.build("espeak-ng:en-us:loudness=3")


def test_a_missing_api_key_keeps_its_type_through_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """The dry run builds keyless providers by catching MissingKeyError (tasks.provider_cache._build), not by matching
    the message: the registry adds the spec to the message and keeps the type; any other bad spec stays a SpecError."""
    from ttseval.core.errors import MissingKeyError

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(MissingKeyError) as missing:
        TTS.build("openai:alloy")
    assert str(missing.value).startswith("tts spec 'openai:alloy': openai needs an API key: set OPENAI_API_KEY")
    assert missing.value.spec == "openai:alloy"
    with pytest.raises(SpecError) as bad:
        TTS.build("openai:alloy:loudness=3", api_key="k")
    assert "loudness" in str(bad.value) and not isinstance(bad.value, MissingKeyError)


def test_a_plugin_cannot_take_a_built_in_name() -> None:
    with pytest.raises(
        ConfigError,
        match=r"setting plugins\.tts: 'flite' -> 'tests\.support\.fakes:FlakyTTS' reuses the name "
        r"of the built-in tts provider 'flite' \(ttseval\.providers\.tts\.flite:FliteTTS\); "
        r"give the plugin another name",
    ):
        TTS.build("flite:slt", extra={"flite": "tests.support.fakes:FlakyTTS"})
    # naming the built-in class itself substitutes nothing
    assert type(TTS.build("flite:slt", extra={"flite": "ttseval.providers.tts.flite:FliteTTS"})) is FliteTTS


def _dist_info(site: Path, name: str, entry_points: str) -> None:
    """An installed distribution's metadata as pip writes it, with the given entry_points.txt."""
    info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(entry_points)


def test_an_installed_plugin_cannot_take_a_built_in_name_nor_another_plugins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ttseval.core.registry import _installed_entries

    _dist_info(tmp_path, "shadow-mos", "[ttseval.quality]\ndnsmos = tests.support.healing:CountingMOS\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    _installed_entries.cache_clear()
    try:
        with pytest.raises(ConfigError) as shadow:
            QUALITY.build("dnsmos")
        assert str(shadow.value) == (
            "shadow-mos declares the quality provider 'dnsmos' -> 'tests.support.healing:CountingMOS' (entry point "
            "group ttseval.quality), the name of a built-in one (ttseval.providers.quality.dnsmos:DNSMOSQuality); "
            "the plugin must use another name"
        )
        assert TTS.entries()["flite"] == "ttseval.providers.tts.flite:FliteTTS"  # other kinds are not affected
        (tmp_path / "shadow_mos-1.0.dist-info" / "entry_points.txt").write_text(
            "[ttseval.quality]\ncount-mos = tests.support.healing:CountingMOS\n"
        )
        _dist_info(tmp_path, "other-mos", "[ttseval.quality]\ncount-mos = tests.support.registry_plugins:SilentTTS\n")
        _installed_entries.cache_clear()
        with pytest.raises(
            ConfigError,
            match=r"(shadow-mos|other-mos) and (shadow-mos|other-mos) both declare the "
            r"quality provider 'count-mos' \(entry point group ttseval\.quality\)",
        ):
            QUALITY.entries()
        # a setting cannot take an installed plugin's name for another class either
        (tmp_path / "other_mos-1.0.dist-info" / "entry_points.txt").write_text("")
        _installed_entries.cache_clear()
        assert QUALITY.entries()["count-mos"] == "tests.support.healing:CountingMOS"
        with pytest.raises(
            ConfigError,
            match=r"setting plugins\.quality: 'count-mos' -> 'tests\.x:Y' reuses the "
            r"name of the installed quality provider 'count-mos'",
        ):
            QUALITY.entries({"count-mos": "tests.x:Y"})
    finally:
        _installed_entries.cache_clear()


def test_a_plugin_module_that_does_not_import_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"tts provider 'ghost': cannot import 'tests\.no_such_module'"):
        TTS.build("ghost", extra={"ghost": "tests.no_such_module:Ghost"})
    with pytest.raises(ConfigError, match=r"'tests\.support\.registry_plugins' has no class 'Ghost'"):
        TTS.build("ghost", extra={"ghost": "tests.support.registry_plugins:Ghost"})


# -- typed by protocol ---------------------------------------------------------------------------------------------


def test_every_registered_provider_conforms_to_its_kind() -> None:
    expected = {
        "tts": "TTSProvider",
        "asr": "ASRProvider",
        "quality": "QualityProvider",
        "lid": "LanguageIdentifier",
        "speaker": "SpeakerEncoder",
        "judge": "Judge",
        "llm": "LLM",
    }
    assert {kind: reg.protocol.__name__ for kind, reg in REGISTRIES.items()} == expected
    for registry in REGISTRIES.values():
        for name in registry.names:
            assert isinstance(registry.resolve(name), type)  # resolve checks the class against the protocol


def test_a_provider_missing_a_method_is_refused_naming_it() -> None:
    with pytest.raises(
        SpecError,
        match=r"tts provider 'mute' \(tests\.support\.registry_plugins:NoSynthesizeTTS\) does not "
        r"implement TTSProvider: missing synthesize\(\)",
    ):
        TTS.build("mute", extra={"mute": "tests.support.registry_plugins:NoSynthesizeTTS"})
    # the same class is no judge at all
    with pytest.raises(
        SpecError,
        match=r"does not implement Judge: missing judge_pairs\(\) or "
        r"judge_instructions\(\)",
    ):
        JUDGES.resolve("mute", extra={"mute": "tests.support.registry_plugins:NoSynthesizeTTS"})


def test_a_judge_must_judge_something_and_carry_its_id() -> None:
    with pytest.raises(SpecError, match=r"judge provider 'idle' .* missing judge_pairs\(\) or judge_instructions\(\)"):
        JUDGES.build("idle", extra={"idle": "tests.support.registry_plugins:MetadataOnlyJudge"})
    with pytest.raises(
        SpecError,
        match=r"judge provider 'anonymous' \(NoIdJudge\) does not implement Judge: its "
        r"instance has no judge_id",
    ):
        JUDGES.build("anonymous", extra={"anonymous": "tests.support.registry_plugins:NoIdJudge"})
    assert JUDGES.build("objective").judge_id.startswith("objective-")


# -- metadata ------------------------------------------------------------------------------------------------------

METADATA = (*METADATA_DEFAULTS, "version")


def test_every_built_in_provider_declares_its_metadata() -> None:
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    for kind, registry in REGISTRIES.items():
        for name in registry.names:
            cls = registry.resolve(name)
            assert [a for a in METADATA if a not in dir(cls)] == [], f"{kind} {name}"
            info = registry.info(name)
            assert info.extra is None or info.extra in extras, f"{kind} {name}: extra {info.extra!r}"
            assert info.problems() == [], info.problems()  # this environment has everything installed
            assert info.version not in ("", "unknown", "unavailable"), f"{kind} {name}"
            codes = info.language_codes()
            assert codes in (ANY_LANGUAGE, PER_VOICE) or (isinstance(codes, frozenset) and "en" in codes)
            if kind != "tts":
                assert info.output_sample_rate_hz is None


def test_each_registry_is_declared_beside_its_providers() -> None:
    # Every entry of a kind points into the package that declares the kind's registry, at a class whose `name` is
    # the entry's name: adding a provider touches its own folder (and its test), nothing in the core.
    import importlib

    packages = {
        p.name: importlib.import_module(f"ttseval.providers.{p.name}")
        for p in (ROOT / "ttseval" / "providers").iterdir()
        if (p / "__init__.py").is_file()
    }
    for kind, registry in REGISTRIES.items():
        [home] = [name for name, package in packages.items() if any(v is registry for v in vars(package).values())]
        for name in registry.names:
            target = registry.entries()[name]
            assert target.startswith(f"ttseval.providers.{home}."), (kind, name, target)
            assert registry.resolve(name).name == name, (kind, name)
    assert "REGISTRIES" not in vars(importlib.import_module("ttseval.core.registry"))  # the core keeps the mechanism


def test_declared_metadata_values() -> None:
    # A sample of declarations the pipeline acts on (instructions passed on, GPU placement, the extra named in a
    # refusal, a fixed sample rate, the programs and modules checked before a run); every provider's declarations
    # are checked for completeness and against this environment by test_every_built_in_provider_declares_its_metadata.
    sample = {
        ("tts", "espeak-ng"): (False, False, None, 22050, ("espeak-ng",), ()),
        ("tts", "piper"): (False, False, "engines", None, (), ("piper", "onnxruntime")),
        ("tts", "transformers-tts"): (False, True, "models", None, (), ("torch", "transformers")),
        ("tts", "openai"): (True, False, None, None, (), ("openai",)),  # gpt-4o-mini-tts reads instructions
        ("tts", "gemini"): (True, False, None, 24000, (), ("google.genai",)),
        ("asr", "faster-whisper"): (False, True, "engines", None, (), ("faster_whisper",)),
        ("quality", "dnsmos"): (False, False, "engines", None, (), ("speechmos", "onnxruntime")),
        ("speaker", "sherpa-onnx"): (False, False, "engines", None, (), ("sherpa_onnx", "onnxruntime")),
        ("judge", "objective"): (False, False, None, None, (), ()),
        ("judge", "transformers-judge"): (True, True, "models", None, (), ("torch",)),
        ("llm", "openai"): (False, False, None, None, (), ("openai",)),
    }
    for (kind, name), expected in sample.items():
        info = REGISTRIES[kind].info(name)
        assert (
            info.accepts_instruction,
            info.gpu,
            info.extra,
            info.output_sample_rate_hz,
            info.requires,
            info.imports,
        ) == expected, (kind, name)
    assert TTS.info("flite").language_codes() == frozenset({"en"})
    assert TTS.info("piper").language_codes() == PER_VOICE
    assert QUALITY.info("dnsmos").language_codes() == ANY_LANGUAGE
    assert {"en", "fr", "de", "cmn"} <= TTS.info("espeak-ng").language_codes()
    assert "ps" not in TTS.info("espeak-ng").language_codes()  # no Pashto voice in espeak-ng 1.51
    assert {"en", "ps", "zh", "cmn", "jv", "nb", "yue"} <= ASR.info("faster-whisper").language_codes()
    assert LLMS.info("openai").version == importlib.metadata.version("openai")


def test_declared_sample_rate_and_version_match_what_the_engine_does() -> None:
    espeak = TTS.build("espeak-ng:en-us")
    assert espeak.synthesize("Hello there.", "en").sample_rate_hz == EspeakNGTTS.output_sample_rate_hz == 22050
    out = subprocess.run(["espeak-ng", "--version"], capture_output=True, text=True, check=True).stdout
    assert espeak.version == EspeakNGTTS.version and f"text-to-speech: {EspeakNGTTS.version} " in out
    flite = TTS.build("flite:slt")
    assert flite.metadata()["version"] == FliteTTS.version
    assert FliteTTS.version in subprocess.run(["flite", "--version"], capture_output=True, text=True).stdout


def test_a_plugin_without_metadata_gets_the_defaults() -> None:
    info = TTS.info("silent", {"silent": "tests.support.registry_plugins:SilentTTS"})
    assert (
        info.languages,
        info.gpu,
        info.extra,
        info.output_sample_rate_hz,
        info.requires,
        info.imports,
        info.version,
    ) == (PER_VOICE, False, None, None, (), (), "unknown")


# -- missing programs and packages ---------------------------------------------------------------------------------


def test_a_missing_program_or_package_names_what_to_install() -> None:
    with pytest.raises(ConfigError) as e:
        TTS.check_available("program", {"program": "tests.support.registry_plugins:ProgramTTS"})
    assert str(e.value) == (
        "ttseval-no-such-program is not installed: apt-get install ttseval-no-such-program "
        "(needed by tts provider 'program')"
    )
    with pytest.raises(ConfigError) as e:
        TTS.build("needy:x", extra={"needy": "tests.support.registry_plugins:NeedyTTS"})
    assert str(e.value) == (
        "Python package 'ttseval_no_such_module' is not installed: pip install 'ttseval[engines]' "
        "(needed by tts provider 'needy')"
    )
    TTS.check_available("espeak-ng:en-us")  # installed here: no error


def _path_without(tmp_path: Path) -> str:
    """A PATH holding only python (the venv's, by symlink): no espeak-ng, no flite, no git."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    return str(bin_dir)


def test_evaluate_without_espeak_ng_is_one_line_and_exit_2(tmp_path: Path) -> None:
    store = tmp_path / "store"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TTSEVAL_", "AWS_", "PREFECT_API"))}
    env |= {"PATH": _path_without(tmp_path), "PYTHONPATH": str(ROOT), **TELEMETRY_OFF}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "ttseval.cli",
            "evaluate",
            "--systems",
            "espeak-ng:en-us",
            "--store",
            str(store),
            "--run-id",
            "nothing",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 2, out.stderr
    assert out.stderr.splitlines() == [
        "ttseval: error: espeak-ng is not installed: apt-get install espeak-ng (needed by tts provider 'espeak-ng')"
    ]
    assert "Traceback" not in out.stdout + out.stderr
    assert not store.exists()


# -- `ttseval providers` -------------------------------------------------------------------------------------------


def test_providers_command_lists_metadata_without_building_or_heavy_imports() -> None:
    # Every provider class's constructor is replaced by one that fails: listing must not build any.
    code = (
        "import sys\n"
        "from ttseval.providers.registries import REGISTRIES\n"
        "def refuse(self, *a, **k):\n"
        "    raise AssertionError(f'built {type(self).__name__}')\n"
        "for registry in REGISTRIES.values():\n"
        "    for name in registry.names:\n"
        "        registry.resolve(name).__init__ = refuse\n"
        "from ttseval.cli import cmd_providers\n"
        "assert cmd_providers(None) == 0\n"
        "heavy = {'prefect', 'dask', 'distributed', 'torch', 'onnxruntime', 'faster_whisper', 'piper', 'speechmos',\n"
        "         'transformers', 'openai', 'google.genai'}\n"
        "print('HEAVY', sorted(heavy & set(sys.modules)))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("TTSEVAL_")}
    env["TTSEVAL_PLUGINS"] = json.dumps({"tts": {"flaky": "tests.support.fakes:FlakyTTS"}})
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "HEAVY []" in out.stdout
    lines = [line.split() for line in out.stdout.splitlines()]
    assert ["name", "languages", "instruction", "gpu", "extra", "sample", "rate", "needs", "version"] in lines
    rows = {line[0]: line for line in lines if line}
    assert rows["espeak-ng"][:8] == [
        "espeak-ng",
        str(len(TTS.info("espeak-ng").language_codes())),
        "languages",
        "no",
        "no",
        "-",
        "22050",
        "Hz",
    ]
    assert rows["espeak-ng"][8:] == ["espeak-ng", EspeakNGTTS.version]
    assert rows["flite"][:8] == ["flite", "en", "no", "no", "-", "per", "voice", "flite"]
    assert rows["piper"][:9] == ["piper", "per", "voice", "no", "no", "engines", "per", "voice", "-"]
    assert rows["flaky"][:2] == ["flaky", "(plugin)"]
    assert rows["transformers-judge"][:6] == ["transformers-judge", "any", "yes", "yes", "models", "-"]
    assert [line[0] for line in lines if line and line[0].endswith(":")] == [
        "tts:",
        "asr:",
        "quality:",
        "lid:",
        "speaker:",
        "judge:",
        "llm:",
    ]


def test_a_label_names_a_system_without_changing_its_id_or_reaching_the_provider() -> None:
    """`label=` (registry.LABEL_OPTION): a self-hosted system is shown by its label, not its URL, in every table,
    report and alert (registry.system_name), keeps its id (its rows are reused when it is relabelled), and is
    not an option the provider is built with (espeak-ng refuses options it does not know, as the test above shows)."""
    from ttseval.core.registry import Spec, system_name
    from ttseval.tasks.report.markdown import rows_for_display

    url = "openai:alloy:base_url=http://gpu7.lab:8000/v1:model=ours"
    labelled = Spec.parse(f"{url}:label=ours-v3")
    assert labelled.label == "ours-v3" and Spec.parse(url).label is None
    assert labelled.id == Spec.parse(url).id and labelled.canonical != Spec.parse(url).canonical
    assert system_name(labelled.canonical) == "ours-v3" and system_name(url) == url
    assert system_name("not a spec: :") == "not a spec: :"  # a stored name that does not parse is shown as it is
    assert type(TTS.build("espeak-ng:en-us:label=robot")) is EspeakNGTTS
    import pandas as pd

    from ttseval.metrics.summary import SUMMARY_COLUMNS

    row = dict.fromkeys(SUMMARY_COLUMNS, float("nan")) | {
        "system_spec": labelled.canonical,
        "asr_spec": None,
        "n_ok": 1,
        "n_items": 1,
        "n_failed": 0,
        "n_empty": 0,
        "n_unsupported": 0,
        "role": "tts",
    }
    assert rows_for_display(pd.DataFrame([row]))[0]["system"] == "ours-v3"
