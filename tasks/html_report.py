"""The HTML run report, kept importable at its former path: the code is ttseval.tasks.report.html."""

from ttseval.tasks.report.html import ASSETS, FILES, build_data, compare_line, html_location, write_html_report

__all__ = ["ASSETS", "FILES", "build_data", "compare_line", "html_location", "write_html_report"]
