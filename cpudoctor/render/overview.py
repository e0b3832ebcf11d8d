"""The Overview's words: where to start, and the rows its cards show while the machine is being read.

The page (:mod:`cpudoctor.gui.overview_page`) lays them out. The first line a
new user reads points at one thing: the top finding, or, when the set-up has
nothing to fix, the Inspector for a run that is slow anyway.
"""

from __future__ import annotations

from cpudoctor.kits.escape import html_escape
from cpudoctor.model import Finding
from cpudoctor.render.words import severity

# Each card's rows as the report fills them: shown with "…" while the machine is read, so nothing jumps.
SKELETON_ROWS: dict[str, tuple[str, ...]] = {
    "Processor": ("Vendor", "Family / model", "Microarchitecture", "Architecture", "Virtual machine"),
    "Cores and caches": ("Cores / threads", "Sockets", "SMT", "CCX (L3) layout", "L3 total", "NUMA", "Usable here"),
    "Clocks": ("Base", "Max (boost)", "Now", "Governor", "Driver", "Boost"),
    "Memory": ("Total", "Available", "In use now", "Swap", "Transparent huge pages"),
    "System": ("OS", "Kernel", "C library", "Runs in", "Python environment", "PyTorch"),
}
READING = "…"
READING_TIP = "Being read from this machine"
ADVISOR_PENDING = "The advisor runs once the software check is done."
# Findings of the quick facts while the child processes check the Python stack (they are replaced, not added to)
PROVISIONAL_NONE = "No findings so far; the advisor looks again once the Python stack is checked."
PROVISIONAL_NOTE = "so far: the Python stack is still being checked"


def start_here(ranked: list[Finding]) -> tuple[str, str]:
    """(rich text, link target) of the Overview's "start here" line for findings in reading order.

    The target is ``finding:CODE`` (open that finding in the Advisor) or ``page:Inspector``.
    """
    top = next((f for f in ranked if f.severity != "ok"), None)
    if top is not None and top.severity in ("error", "warning"):
        return (f"<b>Start here:</b> <a href='finding:{html_escape(top.code)}'>{html_escape(top.title)}</a> "
                f"({severity(top.severity).name.lower()}, {html_escape(top.code)})", f"finding:{top.code}")
    nothing = "Nothing in the set-up needs fixing" if top is None else "Only suggestions for the set-up"
    return (f"<b>Start here:</b> {nothing}. Training still slow? <a href='page:Inspector'>Inspect the running "
            "job</a> to see where its time goes.", "page:Inspector")
