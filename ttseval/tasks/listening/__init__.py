"""Listening tests from a stored run (Rethinking MUSHRA): export for webMUSHRA, ratings back, analysis.

Export writes a folder laid out like webMUSHRA's root, to copy over it:

    <out>/configs/<test>-r01.yaml ...            one config per rater (page order and blinded names seeded)
    <out>/configs/resources/audio/<test>/*.wav   the stimuli: one rate, a page's stimuli padded to one length
    <out>/README.md                              how to run it and bring the results back

Raters open `?config=<test>-r07.yaml`; webMUSHRA writes results/<test>-r07/mushra.csv (and lss.csv for MOS, CMOS
and MUSHRA-DG scoresheets). The key from blinded names back to systems never goes into that folder: it is the
run's `listening_stimuli` table, and the seed, page orders and settings are runs/<run>/listening/<test>/test.json.

Test kinds, as the paper names them: `mushra` (mentioned reference, hidden reference, anchors), `mushra-nmr` (no
mentioned reference: the page hides its reference button; the natural speech is still rated, as the hidden
reference), `mushra-dg` and `mushra-dg-nmr` (a MUSHRA page to compare the clips, then appendix A.6's scoresheet
for each of them as a webMUSHRA multi-scale likert page; the score is the formula's), `mos` (5-point, one clip at a
time) and `cmos` (each system against the reference: the pair as one stimulus, A then B, rated -3..+3 in steps
of 0.5). Choices the paper or webMUSHRA leave open are stated where they are made.

One module per job:

    common     the test kinds, their rating scales, the MUSHRA-DG weights from the settings, a test's rows
    anchors    Anchor-X and Anchor-Y from a clip (audio processing), clips padded to one length
    export     export_test: the items, stimuli and key of a test picked from a stored run, its audio written
    webmushra  webMUSHRA's config format: one YAML per rater, the scoresheet and rating scales, the README
    results    read_results: webMUSHRA's mushra.csv and lss.csv, or the plain CSV, as raw rating rows
    ingest     ingest_ratings: raw rows checked and mapped through the key into the run's ratings table
    analysis   analyse_test: the stored ratings analysed (ttseval.metrics.listening) into Markdown
    figures    the analysis' PNG figures (per-rater boxes, subsampling curves, fault isolation)

Every name below is importable from `ttseval.tasks.listening`, as before the split.
"""

from ttseval.metrics.listening import GRID
from ttseval.tasks.listening.analysis import analyse_test
from ttseval.tasks.listening.anchors import anchor_x, anchor_y, pad_to_longest
from ttseval.tasks.listening.common import KINDS, MUSHRA_KINDS, SCALES, dg_weights, of_test, scale_of
from ttseval.tasks.listening.export import CMOS_GAP_S, export_test
from ttseval.tasks.listening.figures import fault_figure, rater_boxplot, subsampling_figure
from ttseval.tasks.listening.ingest import ingest_ratings
from ttseval.tasks.listening.results import PLAIN_OPTIONAL, PLAIN_REQUIRED, read_results
from ttseval.tasks.listening.webmushra import (
    CMOS_RESPONSE,
    COUNT_CHOICES,
    MOS_RESPONSE,
    PERCEPTUAL_CHOICES,
    Stimulus,
    readme,
    write_configs,
)

__all__ = [
    "CMOS_GAP_S",
    "CMOS_RESPONSE",
    "COUNT_CHOICES",
    "GRID",
    "KINDS",
    "MOS_RESPONSE",
    "MUSHRA_KINDS",
    "PERCEPTUAL_CHOICES",
    "PLAIN_OPTIONAL",
    "PLAIN_REQUIRED",
    "SCALES",
    "Stimulus",
    "analyse_test",
    "anchor_x",
    "anchor_y",
    "dg_weights",
    "export_test",
    "fault_figure",
    "ingest_ratings",
    "of_test",
    "pad_to_longest",
    "rater_boxplot",
    "read_results",
    "readme",
    "scale_of",
    "subsampling_figure",
    "write_configs",
]
