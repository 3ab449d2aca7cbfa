"""Run reports in a browser: ``report.html`` for each run folder, and ``python -m harness serve``.

- :mod:`.page`      ``report.html``: one self-contained page (verdict, summary, plots,
                    anomalies linked to the history, timeline, history viewer)
- :mod:`.timeline`  the timeline's data: every operation per process, every fault
- :mod:`.markdown`  the report's Markdown sections as HTML
- :mod:`.index`     what ``serve`` lists: the runs and matrices under a folder
- :mod:`.serve`     ``python -m harness serve``: the index, the reports, a matrix's table
- ``assets/``       the pages' stylesheet and scripts, inlined into each page
"""

from .page import REPORT_HTML, render, write_html

__all__ = ["REPORT_HTML", "render", "write_html"]
