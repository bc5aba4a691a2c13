"""The report's sections over the clip stages' tables: the INSV-A screening card, recognisers compared, paired
comparisons with the baseline, prosody and timing, speaker similarity, MOS predictors, audio checks, and WER by
category, language and depth.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ttseval.core.config import Settings
from ttseval.core.registry import system_name
from ttseval.core.store import ArtifactStore
from ttseval.tasks.report.compute import RunTables
from ttseval.tasks.report.format import ROLE_LABEL, markdown_table, missing, num, pct, section, with_ci


def _gate(value: object, gate: str) -> str:
    return f"{value} ({gate})"


def insv_markdown(store: ArtifactStore, run_id: str, settings: Settings, tables: RunTables) -> str:
    """The INSV-A report card (PashtoTTS-Bench Table 8, ttseval.metrics.screening) per system, language and recogniser,
    grapheme-class WER where the language has letter classes (the per-sentence rows are every run's
    runs/<id>/per_sentence.csv, tasks/report/per_item.py). Only for runs with an item in a language other than
    English."""
    from ttseval.core.languages import base_language
    from ttseval.metrics.screening import grapheme_class_wer, insv_card, per_sentence
    from ttseval.providers.lid.fasttext_text import MODEL

    items, synthesis = tables.items, tables.synthesis
    if all(base_language(lang) == "en" for lang in items["language"].unique()):
        return ""
    lid = store.read(run_id, "lid") if store.part_files(run_id, "lid") else None
    t = settings.insv
    roles = {system_id: settings.role_of(system_id) for system_id in synthesis["system_id"].unique()}
    card = insv_card(
        items,
        synthesis,
        tables.own_transcripts,
        lid,
        roles=roles,
        thresholds=t,
        n_resamples=settings.bootstrap_resamples,
        seed=settings.seed,
    )
    sentences = per_sentence(items, tables.own_transcripts, digits=t.digits)
    rows = []
    for r in card.to_dict("records"):
        lid = ", ".join(f"{k} {pct(v)}%" for k, v in r["lid_rates"].items()) or "no LID model"
        rows.append(
            [
                system_name(r["system_spec"]) + ROLE_LABEL[r["role"]],
                r["language"],
                "–" if missing(r["asr_spec"]) else r["asr_spec"],
                _gate(f"{pct(r['completion_rate'])}% ({r['n_audio']}/{r['n_items']})", r["gate_f1"]),
                _gate(
                    f"{num(r['sfr'], 3)}" + (f", {r['n_sfr_undefined']} undefined" if r["n_sfr_undefined"] else ""),
                    r["gate_s"],
                ),
                _gate(lid, r["gate_v"]),
                f"{pct(r['asr_lid_rate'])}%",
                f"{pct(r['text_lid_rate'])}%",
                with_ci(r["wer"], r["wer_ci_low"], r["wer_ci_high"], percent=True)
                + (
                    "" if missing(r["natural_wer"]) or r["role"] == "natural" else f" (natural {pct(r['natural_wer'])})"
                ),
                num(r["perfect_pct"], 1),
                num(r["low_error_pct"], 1),
                r["f1"],
                r["f2"],
                r["f3"] + (f" ({r['f3_classes']})" if r["f3_classes"] else ""),
                r["f4"],
                r["f5"] + (f" ({r['n_high_cer_wer']})" if r["n_high_cer_wer"] else ""),
                str(r["n_for_mos"]),
            ]
        )
    headers = [
        "system",
        "language",
        "recogniser",
        "F1 synthesis",
        "S: SFR",
        "V: LID",
        "recogniser's detection (diagnostic)",
        "transcript language (diagnostic)",
        "I: WER % [95% CI]",
        "Perfect %",
        "Low-error %",
        "F1",
        "F2",
        "F3",
        "F4",
        "F5",
        "N: clips for native MOS",
    ]
    lines = [
        "",
        "## INSV-A screening (PashtoTTS-Bench)",
        "",
        (
            f"Gates: F1 audio for at least {pct(t.completion)}% of items; S mean transcript Script Fidelity Rate "
            f"at least {t.sfr} (undefined transcripts counted apart; digits {t.digits}d); V every LID model's "
            f"target-language rate at least {pct(t.lid_pass)}% passes, all below {pct(t.lid_fail)}% fail, "
            "anything else is unresolved; the recogniser's own language detection and the transcript's text "
            f"language ({MODEL}) are diagnostics and never vote; WER is descriptive, beside the natural-speech "
            "baseline's when the run has one. Labels are screening labels, never more than the automatic evidence "
            f"supports (F4 needs native listeners). Low-error: WER at most {pct(t.low_error_wer)}%. Per-sentence "
            f"WER, CER, SFR and detected language: `{store.display('runs', run_id, 'per_sentence.csv')}`."
        ),
        "",
        markdown_table(headers, rows),
    ]
    classes = []
    # One table row per (system, recogniser, language, class): a language heard by several recognisers has a
    # class WER from each, told apart by the recogniser column as in the card above.
    for (system_id, _, language), g in sentences.groupby(["system_id", "asr_id", "language"], sort=False):
        recogniser = g["asr_spec"].iloc[0]
        for c in grapheme_class_wer(g, language).to_dict("records"):
            spec = card.loc[card["system_id"] == system_id, "system_spec"].iloc[0]
            classes.append(
                [
                    spec,
                    language,
                    recogniser,
                    c["class"],
                    c["letters"],
                    str(c["n_items"]),
                    pct(c["wer"]),
                    pct(c["overall_wer"]),
                ]
            )
    if classes:
        lines += [
            "",
            (
                f"Grapheme-class WER (F3 screening: a class at least {t.f3_ratio}x the overall WER over at "
                f"least {t.f3_min_items} utterances is a candidate):"
            ),
            "",
            markdown_table(
                ["system", "language", "recogniser", "class", "letters", "utterances", "class WER %", "overall WER %"],
                classes,
            ),
        ]
    return "\n".join(lines) + "\n"


def recognisers_markdown(settings: Settings, tables: RunTables, names: dict[str, str]) -> str:
    """For each language the `asr` setting gives several recognisers: each one's WER per system over the clips all
    of them transcribed, which recogniser ranks (the first listed: put the independent one first, PashtoTTS-Bench
    4.4), and whether the rankings agree (Kendall's W)."""
    from ttseval.core.languages import base_language
    from ttseval.core.registry import Spec
    from ttseval.metrics.screening import per_sentence, recogniser_rankings

    items = tables.items
    groups: dict[tuple[str, ...], list[str]] = {}
    for language in items["language"].unique():
        specs = tuple(settings.asrs_for(language))
        if len(specs) > 1:
            groups.setdefault(specs, []).append(language)
    if not groups:
        return ""
    transcripts = tables.transcripts
    sentences = per_sentence(items, transcripts[transcripts["system_id"].isin(tables.system_ids)])
    ids_of: dict[str, str] = dict(zip(transcripts["asr_spec"], transcripts["asr_id"]))
    lines = [
        "",
        "## Recognisers",
        "",
        (
            "Languages with several recognisers: each one's WER % per system over the clips all of them "
            "transcribed. The first listed ranks the systems (list the independent recogniser first: "
            "PashtoTTS-Bench 4.4); Kendall's W says how far the rankings agree (1: the same order)."
        ),
    ]
    for specs, languages in groups.items():
        found = [ids_of.get(Spec.parse(x).canonical) for x in specs]
        asr_ids = [a for a in found if a is not None]
        if len(asr_ids) < len(found):
            absent = [x for x, a in zip(specs, found) if a is None]
            lines += ["", f"{', '.join(languages)}: no transcripts yet from {', '.join(absent)}."]
            continue
        mine = sentences[sentences["language"].map(base_language).isin({base_language(x) for x in languages})]
        wer, w = recogniser_rankings(mine, asr_ids)
        ranked = wer.sort_values(asr_ids[0]) if len(wer) else wer
        rows = [
            [names.get(system_id, system_id), *(pct(v) for v in r)]
            for system_id, r in zip(ranked.index, ranked.to_numpy())
        ]
        lines += [
            "",
            f"{', '.join(languages)}: ranked by `{specs[0]}`; Kendall's W across recognisers {num(w, 3)}.",
            "",
            markdown_table(["system", *(f"WER % {x}" for x in specs)], rows),
        ]
    return "\n".join(lines) + "\n"


def paired_markdown(settings: Settings, tables: RunTables, baseline_id: str, names: dict[str, str]) -> str:
    """Each system against the baseline, item by item (ttseval.metrics.paired): WER and CER per recogniser the two
    share,
    MOS, SIM per encoder; the difference with its BCa 95% CI ("n too small" under MIN_INTERVAL_ITEMS items), the
    permutation and Wilcoxon p-values, the permutation p adjusted across every test of the table (the family), and
    'differs' from that adjusted p at the alpha setting."""
    from dataclasses import asdict

    from ttseval.metrics.multiplicity import METHODS
    from ttseval.metrics.paired import MIN_INTERVAL_ITEMS, PAIRED_COLUMNS, TEST, decide, paired_mean, paired_table

    system_ids = tables.system_ids
    if baseline_id not in system_ids or len(system_ids) < 2:
        return ""
    transcripts, quality = tables.transcripts, tables.quality
    specs = dict(zip(transcripts["asr_id"], transcripts["asr_spec"]))
    no_rows_t, no_rows_q = transcripts.iloc[0:0], quality.iloc[0:0]

    def compare(
        base_t: pd.DataFrame, sys_t: pd.DataFrame, base_q: pd.DataFrame, sys_q: pd.DataFrame
    ) -> list[dict[str, Any]]:
        paired: list[dict[str, Any]] = paired_table(
            base_t,
            sys_t,
            base_q,
            sys_q,
            n_resamples=settings.bootstrap_resamples,
            seed=settings.seed,
            n_permutations=settings.permutation_resamples,
        ).to_dict("records")
        return paired

    found = []  # (system, recogniser / encoder, row): the report's family of tests
    for system_id in system_ids:
        if system_id == baseline_id:
            continue
        for asr_id in transcripts.loc[transcripts["system_id"] == system_id, "asr_id"].unique():
            mine = transcripts[transcripts["asr_id"] == asr_id]
            found += [
                (system_id, specs[asr_id], r)
                for r in compare(
                    mine[mine["system_id"] == baseline_id], mine[mine["system_id"] == system_id], no_rows_q, no_rows_q
                )
            ]
        found += [
            (system_id, "–", r)
            for r in compare(
                no_rows_t,
                no_rows_t,
                quality[quality["system_id"] == baseline_id],
                quality[quality["system_id"] == system_id],
            )
        ]
        sim = tables.similarity[tables.similarity["status"] == "ok"]
        for encoder_spec, mine in sim.groupby("encoder_spec", sort=False):  # SIM per encoder, never pooled
            by = {s: mine[mine["system_id"] == s].set_index("item_id")["similarity"] for s in (baseline_id, system_id)}
            shared = by[baseline_id].index.intersection(by[system_id].index)
            if len(shared):
                r = paired_mean(
                    "sim",
                    by[baseline_id].loc[shared],
                    by[system_id].loc[shared],
                    n_resamples=settings.bootstrap_resamples,
                    seed=settings.seed,
                    n_permutations=settings.permutation_resamples,
                )
                found.append((system_id, f"SIM: {encoder_spec}", asdict(r)))
    if not found:
        return ""
    decided = decide(
        pd.DataFrame([r for _, _, r in found], columns=list(PAIRED_COLUMNS)),
        alpha=settings.alpha,
        method=settings.p_adjust,
    ).to_dict("records")
    rows = []
    for (system_id, recogniser, _), r in zip(found, decided):
        interval = (
            "n too small" if r["n_items"] < MIN_INTERVAL_ITEMS else f"[{num(r['ci_low'], 3)}, {num(r['ci_high'], 3)}]"
        )
        rows.append(
            [
                names.get(system_id, system_id),
                recogniser,
                r["metric"],
                str(r["n_items"]),
                num(r["b"], 3),
                num(r["a"], 3),
                f"{num(r['delta'], 3)} {interval}",
                num(r["p_permutation"], 4),
                num(r["p_wilcoxon"], 4),
                num(r["p_adjusted"], 4),
                "**yes**" if r["differs"] else "no",
            ]
        )
    method = METHODS[settings.p_adjust]
    return section(
        f"Paired comparisons with the baseline `{names.get(baseline_id, baseline_id)}`",
        "Item by item on the items both have (ttseval.metrics.paired): system - baseline (pooled WER/CER, "
        'mean MOS and speaker similarity) with a BCa bootstrap 95% CI of the difference ("n too small" '
        f"under {MIN_INTERVAL_ITEMS} items: no interval can be trusted there). 'differs' is decided by a "
        f"{TEST} of the difference, its p adjusted by {method} across the {len(rows)} tests of this "
        f"table and compared with alpha = {settings.alpha} (settings `alpha`, `p_adjust`); the "
        "Wilcoxon signed-rank p is shown beside it and does not vote.",
        [
            "system",
            "recogniser / encoder",
            "metric",
            "items",
            "system",
            "baseline",
            "difference (WER/CER pooled) [95% BCa CI]",
            "permutation p",
            "Wilcoxon p",
            f"adjusted p ({method})",
            "differs",
        ],
        rows,
    )


def significance_markdown(settings: Settings, tables: RunTables, names: dict[str, str]) -> str:
    """A significance matrix per metric (WER and CER per recogniser, MOS) of every system against every other, item
    by item (ttseval.metrics.paired.all_pairs): row minus column, the permutation p adjusted across every cell of
    every matrix (one family) and the decision at alpha. Only for runs of three systems or more (two: the paired
    section says it)."""
    from ttseval.metrics.multiplicity import METHODS
    from ttseval.metrics.paired import TEST, all_pairs, decide

    system_ids = tables.system_ids
    if len(system_ids) < 3:
        return ""
    kw = {
        "n_resamples": settings.bootstrap_resamples,
        "seed": settings.seed,
        "n_permutations": settings.permutation_resamples,
    }
    read = ["item_id", "system_id", "asr_spec", "status", "word_errors", "ref_words", "char_errors", "ref_chars"]
    transcripts = tables.transcripts[read]  # selected before the filter, which copies what it is given
    transcripts = transcripts[(transcripts["status"] == "ok") & transcripts["system_id"].isin(system_ids)]
    parts = []
    for asr_spec, mine in transcripts.groupby("asr_spec", sort=False):
        for metric, errors, totals in (("wer", "word_errors", "ref_words"), ("cer", "char_errors", "ref_chars")):
            wide = {
                c: mine.pivot_table(index="item_id", columns="system_id", values=c, aggfunc="first").reindex(
                    columns=[s for s in system_ids if s in set(mine["system_id"])]
                )
                for c in (errors, totals)
            }
            parts.append(
                all_pairs(metric, wide[errors], totals=wide[totals], **kw).assign(label=f"{metric.upper()}: {asr_spec}")
            )
    quality = tables.quality[
        (tables.quality["status"] == "ok")
        & tables.quality["mos"].notna()
        & tables.quality["system_id"].isin(system_ids)
    ]
    if not quality.empty:
        wide = quality.pivot_table(index="item_id", columns="system_id", values="mos", aggfunc="first")
        parts.append(
            all_pairs("mos", wide.reindex(columns=[s for s in system_ids if s in wide.columns]), **kw).assign(
                label="MOS"
            )
        )
    parts = [p for p in parts if not p.empty]
    if not parts:
        return ""
    family = pd.concat(parts, ignore_index=True)
    decided = decide(family, alpha=settings.alpha, method=settings.p_adjust)
    method = METHODS[settings.p_adjust]
    lines = [
        "",
        "## Significance matrices",
        "",
        (
            f"Every system against every other, item by item on the items both have: row minus column (pooled "
            f"WER/CER, mean MOS), then the {TEST}'s p adjusted by {method} across all {len(decided)} tests of "
            f"these matrices; **bold** where it differs at alpha = {settings.alpha}. Read one row to see where "
            "a system stands against each other system."
        ),
    ]
    for label, g in decided.groupby("label", sort=False):
        present = [s for s in system_ids if s in set(g["system_a"]) | set(g["system_b"])]
        cell = {}
        for r in g.to_dict("records"):
            for row, col, sign in ((r["system_b"], r["system_a"], 1), (r["system_a"], r["system_b"], -1)):
                text = f"{sign * r['delta']:+.3f} (p {num(r['p_adjusted'], 3)})"
                cell[(row, col)] = f"**{text}**" if r["differs"] else text
        table = [
            [names.get(s, s), *("–" if s == t else cell.get((s, t), "no common items") for t in present)]
            for s in present
        ]
        lines += ["", f"### {label}", "", markdown_table(["row - column", *(names.get(t, t) for t in present)], table)]
    return "\n".join(lines) + "\n"


def planning_markdown(settings: Settings, tables: RunTables, baseline_id: str, names: dict[str, str]) -> str:
    """How many items each comparison with the baseline would need (ttseval.metrics.planning): per system, metric
    (WER and CER per recogniser as per-item rates, MOS) the spread of the per-item differences in this run, and the
    items a paired test needs to detect the run's own difference and each of the metric's EFFECT_SIZES at the
    plan_power setting, at alpha divided by the paired section's tests (its Holm family)."""
    from ttseval.metrics.planning import EFFECT_SIZES, items_needed, per_item_sd

    system_ids = tables.system_ids
    if baseline_id not in system_ids or len(system_ids) < 2:
        return ""
    series = []  # (system, recogniser, metric, per-item differences system - baseline)
    t = tables.transcripts[tables.transcripts["status"] == "ok"]
    for asr_spec, mine in t.groupby("asr_spec", sort=False):
        rates = {
            m: mine.assign(r=mine[e] / mine[n]).pivot_table(
                index="item_id", columns="system_id", values="r", aggfunc="first"
            )
            for m, e, n in (("wer", "word_errors", "ref_words"), ("cer", "char_errors", "ref_chars"))
        }
        for system_id in system_ids:
            for metric, wide in rates.items():
                if system_id != baseline_id and {system_id, baseline_id} <= set(wide.columns):
                    series.append((system_id, asr_spec, metric, (wide[system_id] - wide[baseline_id]).dropna()))
    q = tables.quality[(tables.quality["status"] == "ok") & tables.quality["mos"].notna()]
    mos = q.pivot_table(index="item_id", columns="system_id", values="mos", aggfunc="first")
    for system_id in system_ids:
        if system_id != baseline_id and {system_id, baseline_id} <= set(mos.columns):
            series.append((system_id, "–", "mos", (mos[system_id] - mos[baseline_id]).dropna()))
    tests = max(1, len(series))
    sizes = max(len(v) for v in EFFECT_SIZES.values())

    def need(delta: float, sd: float) -> str:
        if not delta or not (sd > 0):
            return "–"
        n = items_needed(delta, sd, alpha=settings.alpha, power=settings.plan_power, tests=tests)
        return "> 1,000,000" if n is None else f"{n:,}"

    rows = []
    for system_id, recogniser, metric, diff in series:
        sd, observed = per_item_sd(diff.to_numpy()), float(diff.mean()) if len(diff) else float("nan")
        grid = [f"{need(delta, sd)} (for {num(delta, 3)})" for delta in EFFECT_SIZES[metric]]
        rows.append(
            [
                names.get(system_id, system_id),
                recogniser,
                metric,
                str(len(diff)),
                num(sd, 3),
                num(observed, 3),
                need(observed, sd) if len(diff) >= 2 else "–",
                *(grid + ["–"] * (sizes - len(grid))),
            ]
        )
    return section(
        "How many items",
        "Items a paired test needs (ttseval.metrics.planning: the paired t-test's exact power, which the "
        "report's permutation test matches in simulation) to detect a difference with the baseline at "
        f"power {settings.plan_power}, at alpha {settings.alpha} / {tests} (the Holm family of these "
        "comparisons), from the spread (sd) of this run's per-item differences (WER/CER as per-item rates). "
        "For WER and CER the difference here is the mean of per-item rates, which weighs every item alike; the "
        "paired comparisons' is pooled (errors over reference words), which weighs every word alike, so the two "
        "differ when items differ in length, and may differ in sign. "
        "Use a pilot run to plan the real one; a dash: no spread or no difference to plan for.",
        [
            "system",
            "recogniser",
            "metric",
            "items now",
            "sd of per-item difference",
            "mean per-item difference now",
            "items for that difference",
            *(f"items for size {k + 1}" for k in range(sizes)),
        ],
        rows,
    )


def prosody_markdown(store: ArtifactStore, run_id: str, tables: RunTables, names: dict[str, str]) -> str:
    """Per system, medians of the prosody table (metrics/prosody.py), the speaking rate from each clip's first
    transcript, and the clips the timing gates flag."""
    from ttseval.metrics.prosody import audio_gates, speaking_rate

    if not store.part_files(run_id, "prosody"):
        return ""
    system_ids = tables.system_ids
    prosody = store.read(run_id, "prosody")
    prosody = prosody[(prosody["status"] == "ok") & prosody["system_id"].isin(system_ids)]
    transcripts = tables.transcripts
    words = (
        transcripts[transcripts["status"] == "ok"]
        .drop_duplicates(["item_id", "system_id"])
        .set_index(["item_id", "system_id"])["hypothesis"]
        .fillna("")
        .str.split()
        .str.len()
    )
    rows = []
    for system_id in system_ids:
        mine = prosody[prosody["system_id"] == system_id]
        if mine.empty:
            continue
        rate = [speaking_rate(int(words.get((r.item_id, r.system_id), 0)), r.speech_s) for r in mine.itertuples()]
        gates = [g for r in mine.itertuples() for g in audio_gates(r.leading_silence_s, r.trailing_silence_s)]
        rows.append(
            [
                names.get(system_id, system_id),
                str(len(mine)),
                num(mine["f0_mean_hz"].median(), 0),
                num(mine["f0_range_st"].median(), 1),
                num(float(pd.Series(rate).median()), 2),
                num(mine["leading_silence_s"].median()),
                num(mine["trailing_silence_s"].median()),
                str(int(mine["n_long_pauses"].sum())),
                str(gates.count("padded")),
                str(gates.count("cut short")),
            ]
        )
    return section(
        "Prosody and timing",
        "Medians per clip: F0 by Praat (parselmouth), speech and silences by Silero VAD, speaking rate = "
        "transcript words / speech seconds. Padded: more than 1 s of silence before or after the speech; "
        "cut short: speech within 30 ms of the end.",
        [
            "system",
            "clips",
            "F0 Hz",
            "F0 range st",
            "words/s",
            "lead silence s",
            "trail silence s",
            "pauses >= 0.5 s",
            "padded",
            "cut short",
        ],
        rows,
    )


def _clones(system_spec: str) -> bool:
    """Whether the system's provider declares that it imitates voice prompts (TTSProvider.clones_voice)."""
    from ttseval.core.registry import Spec
    from ttseval.providers.tts import TTS

    try:
        return bool(getattr(TTS.info(Spec.parse(system_spec).provider).cls, "clones_voice", False))
    except Exception:  # noqa: BLE001 - a plugin that cannot be imported here: say nothing rather than guess
        return False


def similarity_markdown(settings: Settings, tables: RunTables, names: dict[str, str]) -> str:
    """Speaker similarity per encoder and system (ttseval.metrics.similarity): mean SIM with its bootstrap 95% CI, one
    table per encoder (figures from two encoders are never in one column)."""
    from ttseval.metrics.similarity import similarity_summary

    rows_all = tables.similarity[tables.similarity["system_id"].isin(tables.system_ids)]
    if rows_all.empty:
        return ""
    summary = similarity_summary(rows_all, n_resamples=settings.bootstrap_resamples, seed=settings.seed)
    order = {s: i for i, s in enumerate(tables.system_ids)}
    out = []
    for encoder_id, mine in summary.groupby("encoder_id", sort=False):
        failed = rows_all[(rows_all["encoder_id"] == encoder_id) & (rows_all["status"] != "ok")]
        rows = [
            [
                names.get(r.system_id, r.system_id),
                "yes" if _clones(names.get(r.system_id, r.system_id)) else "no",
                r.reference,
                str(r.n),
                with_ci(r.sim, r.sim_ci_low, r.sim_ci_high, 3),
                str(int((failed["system_id"] == r.system_id).sum())),
            ]
            for r in mine.sort_values("system_id", key=lambda c: c.map(order)).itertuples()
        ]
        out.append(
            section(
                f"Speaker similarity: `{mine['encoder_spec'].iloc[0]}`",
                "Cosine similarity of each clip's speaker embedding to its item's voice prompt "
                "(reference 'prompt') or its system's reference voice ('voice'), mean over clips with a "
                "bootstrap 95% CI; higher is closer. 'clones' says whether the system takes the prompt "
                "(a system that does not speaks its own voice).",
                ["system", "clones", "reference", "clips", "SIM [95% CI]", "failed"],
                rows,
            )
        )
    return "".join(out)


def predictors_markdown(settings: Settings, tables: RunTables, names: dict[str, str]) -> str:
    """Each MOS predictor's mean per system with a bootstrap 95% CI, when the run has more than one predictor:
    one column per predictor, never pooled."""
    from ttseval.metrics.bootstrap import MIN_INTERVAL_ITEMS, bootstrap_mean_ci

    quality = tables.all_quality
    quality = quality[(quality["status"] == "ok") & quality["system_id"].isin(tables.system_ids)]
    predictors = list(dict.fromkeys(zip(quality["quality_id"], quality["quality_spec"])))
    if len(predictors) < 2:
        return ""
    rows = []
    for system_id in tables.system_ids:
        cells = []
        for quality_id, _ in predictors:
            values = quality.loc[(quality["system_id"] == system_id) & (quality["quality_id"] == quality_id), "mos"]
            if values.empty:
                cells.append("–")
                continue
            ci = bootstrap_mean_ci(
                values.astype(float).to_numpy(),
                n_resamples=settings.bootstrap_resamples,
                seed=settings.seed,
                min_items=MIN_INTERVAL_ITEMS,
            )
            cells.append(f"{with_ci(ci.point, ci.low, ci.high)} (n={len(values)})")
        rows.append([names.get(system_id, system_id), *cells])
    return section(
        "MOS predictors",
        "Each predictor's mean predicted MOS per system with a bootstrap 95% CI over clips. Predictors are "
        "trained on different listening tests and their scales differ: compare systems within a column. "
        "The summary's MOS is the first predictor's.",
        ["system", *[f"MOS ({spec})" for _, spec in predictors]],
        rows,
    )


def grouped_markdown(tables: RunTables, names: dict[str, str]) -> str:
    """WER per category, language and depth (ttseval.metrics.summary.summarize_by), a table each, for groups with more
    than one value."""
    from ttseval.metrics.summary import summarize_by

    items, synthesis, transcripts = tables.items, tables.synthesis, tables.transcripts
    specs = dict(zip(transcripts["asr_id"], transcripts["asr_spec"]))
    lines = []
    for by in ("category", "language", "depth"):
        if by not in items or items[by].nunique(dropna=True) < 2:
            continue
        table = summarize_by(items[items[by].notna()], synthesis, transcripts, by=by)
        wide = table.pivot_table(index=["system_id", "asr_id"], columns=by, values="wer", sort=False, dropna=False)
        wide = wide.dropna(how="all")  # a recogniser that heard none of a system's clips (another language's)
        rows = [
            [names.get(system_id, system_id), specs.get(asr_id, "–"), *(pct(v) for v in r)]
            for (system_id, asr_id), r in zip(wide.index, wide.to_numpy())
        ]
        lines += ["", f"### WER % by {by}", "", markdown_table(["system", "recogniser", *map(str, wide.columns)], rows)]
    return ("\n## By category, language and depth\n" + "\n".join(lines) + "\n") if lines else ""


def audio_checks_markdown(tables: RunTables, names: dict[str, str]) -> str:
    """Clips that failed a quality gate (metrics/audio_checks.py), per system and gate, with the clips truncated by
    the run's own speaking rate (`truncated`); empty when none did."""
    from ttseval.metrics.audio_checks import MIN_PEERS, TRUNCATED_SHARE, text_chars, truncated

    synthesis = tables.synthesis
    ok = synthesis[synthesis["status"] == "ok"]
    texts = tables.items.set_index("item_id")[["text", "language"]]
    clips = ok[["item_id", "system_id", "duration_s"]].join(texts, on="item_id")
    short = truncated(
        clips["duration_s"].to_numpy(dtype=float, na_value=float("nan")),
        clips["text"].fillna("").map(text_chars).to_numpy(),
        clips["language"].fillna("").to_numpy(),
    )
    flagged = [
        *(
            (system_id, flag)
            for system_id, flags in zip(synthesis["system_id"], synthesis.get("audio_flags", pd.Series(dtype=object)))
            if isinstance(flags, str)
            for flag in flags.split(",")
        ),
        *((system_id, "truncated") for system_id in clips.loc[short, "system_id"]),
    ]
    if not flagged:
        return ""
    counts = pd.DataFrame(flagged, columns=["system_id", "flag"]).groupby(["system_id", "flag"]).size()
    counts = counts.unstack(fill_value=0)
    n_ok = ok.groupby("system_id").size()
    gates = list(counts.columns)
    rows = [[names.get(s, s), int(n_ok.get(s, 0)), *(int(counts.loc[s, g]) for g in gates)] for s in counts.index]
    return section(
        "Audio checks",
        "Clips that failed a quality gate: non-finite samples (nan), over 0.1% of "
        "samples at full scale (clipped), a duration under a third or over three times what the text "
        "predicts at 14 characters a second (too_short, too_long), a rate other than the provider "
        f"declares (sample_rate), and truncated: fewer seconds per character than {TRUNCATED_SHARE:.0%} of the "
        f"median of this run's clips in the same language (every system's, where there are {MIN_PEERS} or more). "
        "They are scored like any clip; here they are counted.",
        ["system", "clips", *gates],
        rows,
    )


SEEDTTS_SIM_PROVIDER = "seedtts-sim"
"""The speaker encoder whose SIM Seed-TTS-eval's table reports (UniSpeech's WavLM-large + ECAPA-TDNN checkpoint)."""


def seedtts_markdown(settings: Settings, tables: RunTables, names: dict[str, str]) -> str:
    """With wer_protocol = "seed-tts-eval": WER per system and recogniser as Seed-TTS-eval's average_wer.py gives it
    (the mean of per-utterance WER, in %, to 3 decimals, over transcripts normalized as its run_wer.py does) and the
    SIM of its encoder (seedtts-sim), labelled comparable with its table. Never shown under any other setting."""
    if settings.wer_protocol != "seed-tts-eval":
        return ""
    out = []
    transcripts = tables.transcripts
    ok = transcripts[(transcripts["status"] == "ok") & transcripts["system_id"].isin(tables.system_ids)]
    ours = ok["normalizer"].fillna("").str.startswith("seedtts-")
    other = int((~ours).sum())  # rows scored before the run id took the setting: never under this label
    ok = ok[ours]
    if not ok.empty:
        order = {s: i for i, s in enumerate(tables.system_ids)}
        rows = []
        for (system_id, asr_spec), g in sorted(ok.groupby(["system_id", "asr_spec"]), key=lambda kv: order[kv[0][0]]):
            rows.append(
                [
                    names.get(system_id, system_id),
                    asr_spec,
                    str(len(g)),
                    f"{round(g['wer'].mean() * 100, 3):g}",
                    str(int((g["wer"] > 0.5).sum())),
                ]
            )
        out.append(
            section(
                "WER comparable with Seed-TTS-eval",
                "Seed-TTS-eval's protocol: transcripts and texts normalized as its run_wer.py does "
                "(normalizers seedtts-en-v1, seedtts-zh-v1: punctuation deleted, English lowercased, "
                "Chinese split into characters, no number normalization) and the WER of each utterance "
                "averaged over utterances, in %, as its average_wer.py does. Its published table used "
                "Whisper-large-v3 (en) and Paraformer-zh (zh) on its test lists: set the figure beside it "
                "only for those recognisers and items."
                + (
                    f" {other} transcript(s) of this run id were normalized another way (scored before "
                    "the setting) and are left out: a new run id scores them all this way."
                    if other
                    else ""
                ),
                ["system", "recogniser", "utterances", "WER % (Seed-TTS-eval)", "utterances > 50%"],
                rows,
            )
        )
    similarity = tables.similarity
    if not similarity.empty:
        ours = similarity[
            similarity["encoder_spec"].str.split(":").str[0].eq(SEEDTTS_SIM_PROVIDER)
            & (similarity["status"] == "ok")
            & similarity["system_id"].isin(tables.system_ids)
        ]
        rows = [
            [names.get(system_id, system_id), spec, str(len(g)), f"{g['similarity'].mean():.3f}"]
            for (system_id, spec), g in ours.groupby(["system_id", "encoder_spec"], sort=False)
        ]
        if rows:
            out.append(
                section(
                    "SIM comparable with Seed-TTS-eval",
                    "Mean cosine similarity of each clip to its voice prompt under UniSpeech's WavLM-large "
                    "speaker-verification checkpoint, Seed-TTS-eval's SIM.",
                    ["system", "encoder", "clips", "SIM (Seed-TTS-eval)"],
                    rows,
                )
            )
    return "".join(out)


def listener_agreement_markdown(store: ArtifactStore, run_id: str, settings: Settings, tables: RunTables) -> str:
    """How far each automatic metric and judge agrees with the run's listening tests (ttseval.metrics.agreement
    .listener_agreement): per test, every recogniser's WER, every predictor's MOS, every encoder's SIM and every
    judge's score against the listeners' mean rating of the same clips. CMOS tests (pairwise) are left out; empty
    without a MUSHRA or MOS test."""
    from ttseval.metrics.agreement import listener_agreement
    from ttseval.metrics.winrate import WINNER_SCORES, against_baseline, scored_verdicts

    ratings = store.read(run_id, "ratings")
    used = ratings[
        (ratings["kind"] != "cmos")
        & ratings["flag"].isna()
        & (ratings["role"].fillna("system") == "system")
        & ratings["score"].notna()
    ]
    if used.empty:
        return ""
    metrics: list[tuple[str, pd.DataFrame, bool]] = []
    for frame, tool, column, label, higher in (
        (tables.transcripts, "asr_spec", "wer", "WER", False),
        (tables.all_quality, "quality_spec", "mos", "MOS", True),
        (tables.similarity, "encoder_spec", "similarity", "SIM", True),
    ):
        ok = frame[frame["status"] == "ok"] if len(frame) else frame
        for spec, group in ok.groupby(tool, sort=True) if len(ok) else []:
            metrics.append((f"{label} ({spec})", group.rename(columns={column: "value"}), higher))
    judged = scored_verdicts(against_baseline(store.read(run_id, "judgments")))  # not other pairs (judge_pairs)
    for spec, group in judged.groupby("judge_spec", sort=True):
        scored = group.assign(value=group["winner"].map(WINNER_SCORES))
        metrics.append((f"judge {spec} (score against the baseline)", scored, True))
    rows = []
    for test_id, test in used.groupby("test_id", sort=True):
        heard = test.groupby(["item_id", "system_id"], as_index=False)["score"].mean()
        for name, frame, higher in metrics:
            got = listener_agreement(
                frame[["item_id", "system_id", "value"]],
                heard,
                higher_is_better=higher,
                n_resamples=settings.bootstrap_resamples,
                seed=settings.seed,
            )
            if got is None:
                continue
            rows.append(
                [
                    str(test_id),
                    name,
                    str(got["n_systems"]),
                    str(got["n_items"]),
                    with_ci(got["spearman"], *got["spearman_ci"], 2),
                    with_ci(got["kendall"], *got["kendall_ci"], 2),
                    f"{num(got['utterance_pearson'], 2)} / {num(got['utterance_spearman'], 2)}",
                    f"{pct(got['pairwise_accuracy'])}% of {got['n_pairs']}",
                ]
            )
    if not rows:
        return ""
    return section(
        "Agreement with listeners",
        "Each automatic metric and judge against the listeners' mean rating of the same clips (MUSHRA and MOS "
        "tests; a lower-is-better metric is negated, so higher always agrees). System level: Spearman's rho and "
        "Kendall's tau of the systems' means, with a percentile bootstrap 95% interval over items; utterance level: "
        "Pearson's r / Spearman's rho over the clips; pairwise accuracy: the share of the system pairs listeners "
        "order that the metric orders the same way. With 3 systems a rank correlation takes a handful of values "
        "(rho is 1, 0.5, -0.5 or -1): read the system-level figures from 6 systems up, and their intervals from 10 "
        "items (fewer: 'n too small'); the utterance level needs items, not systems.",
        ["test", "metric", "systems", "items", "Spearman [95% CI]", "Kendall [95% CI]", "clips r / rho", "pairwise"],
        rows,
    )
