"""One sampled stack -> one category of the time breakdown, by the rules in resources/sample_rules.json.

Categories are ids (:mod:`cpudoctor.model.breakdown`); their names and colours
are render's (:mod:`cpudoctor.render.breakdown`), read from the same file.

The rules are data (validated against resources/sample_rules.schema.json by the
tests) and tried in order; the first that matches names the category (and, for
compute kernels, the library). Each rule looks at some frames only (``where``):
any Python frame, any native frame, the last few frames (the leaf window), or
the leaf alone. A sample is also *blocking* when its leaf window waits in the
kernel (read, poll, sleep, a futex): for helper threads that is idle capacity,
not the job's time (see :mod:`.breakdown`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from cpudoctor.model.breakdown import OTHER
from cpudoctor.probes.process.stacks import Frame


@dataclass(frozen=True)
class Rule:
    id: str
    category: str
    library: str | None
    where: str
    frame: re.Pattern[str] | None
    module: re.Pattern[str] | None
    file: re.Pattern[str] | None
    process: re.Pattern[str] | None
    startup: bool = False


@dataclass(frozen=True)
class Rules:
    categories: tuple[str, ...]       # category ids, in the order the breakdown lists them (the data file's)
    rules: tuple[Rule, ...]
    blocking: re.Pattern[str]
    leaf_window: int
    # a worker loop blocked on its queue of work: (loop file, loop frame, queue file); None: never
    work_wait: tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]] | None = None

    def category_ids(self) -> list[str]:
        return list(self.categories)


@dataclass(frozen=True)
class Verdict:
    category: str
    library: str | None = None     # compute only
    blocking: bool = False         # the leaf window waits in the kernel
    rule: str = ""                 # the id of the rule that decided
    startup: bool = False          # start-up work (importing modules): counted apart


def _compile(text: str | None) -> re.Pattern[str] | None:
    return re.compile(text) if text else None


@lru_cache(maxsize=1)
def rules() -> Rules:
    """The classification rules from resources/sample_rules.json, compiled once."""
    from cpudoctor.knowledge.files import SAMPLE_RULES

    data = SAMPLE_RULES.data
    return Rules(
        categories=tuple(c["id"] for c in data["categories"]),
        rules=tuple(Rule(r["id"], r["category"], r.get("library"), r.get("where", "any"),
                         _compile(r.get("frame")), _compile(r.get("module")), _compile(r.get("file")),
                         _compile(r.get("process")), bool(r.get("startup"))) for r in data["rules"]),
        blocking=re.compile(data["blocking"]["frame"]),
        leaf_window=int(data["leaf_window"]),
        work_wait=_work_wait(data.get("waiting_for_work")),
    )


def _work_wait(data: dict | None) -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]] | None:
    if not data:
        return None
    return re.compile(data["loop_file"]), re.compile(data["loop_frame"]), re.compile(data["queue_file"])


def _frame_matches(rule: Rule, f: Frame) -> bool:
    if rule.frame is not None and not rule.frame.search(f.name):
        return False
    if rule.module is not None and (f.python or not rule.module.search(f.module or "")):
        return False
    if rule.file is not None and (not f.python or not rule.file.search(f.file)):
        return False
    return True


def _meaningful(frames: tuple[Frame, ...]) -> tuple[Frame, ...]:
    """The stack without trailing unresolved libc addresses (the bottom of a syscall wrapper).

    ``...;pthread_cond_timedwait (libc.so.6);0x7f.. (libc.so.6)``: the leaf that
    names something is the one before the bare address.
    """
    end = len(frames)
    while end > 1 and not frames[end - 1].python and frames[end - 1].name.startswith("0x") \
            and frames[end - 1].module.startswith("libc"):
        end -= 1
    return frames[:end]


def is_blocking(frames: tuple[Frame, ...], r: Rules | None = None) -> bool:
    r = r or rules()
    window = _meaningful(frames)[-r.leaf_window:]
    return any(not f.python and r.blocking.search(f.name) for f in window)


def waits_for_work(frames: tuple[Frame, ...], r: Rules | None = None) -> bool:
    """A worker loop blocked on its queue of work (a DataLoader worker waiting for its next index).

    Such a worker is idle because nobody asked it for anything (the loop is slower than the workers, or
    not stepping yet), unlike one blocked reading a file: the two must not be told apart by "blocked" alone.
    """
    r = r or rules()
    if r.work_wait is None:
        return False
    loop_file, loop_frame, queue_file = r.work_wait
    python = [f for f in frames if f.python]
    for outer, inner in zip(python, python[1:]):
        if loop_file.search(outer.file) and loop_frame.search(outer.name):
            return bool(queue_file.search(inner.file))
    return False


def classify(frames: tuple[Frame, ...], process: str = "", r: Rules | None = None) -> Verdict:
    """The category of one stack (root first) of a thread of the process named ``process``."""
    r = r or rules()
    stack = _meaningful(frames)
    window = stack[-r.leaf_window:]
    blocking = any(not f.python and r.blocking.search(f.name) for f in window)
    leaf = stack[-1] if stack else None
    for rule in r.rules:
        if rule.process is not None:
            if rule.process.search(process or ""):
                return Verdict(rule.category, rule.library, blocking, rule.id)
            continue
        if not stack:
            continue
        if rule.where == "blocking":
            hit = blocking
        elif rule.where == "python":
            hit = any(f.python and _frame_matches(rule, f) for f in stack)
        elif rule.where == "native":
            hit = any(not f.python and _frame_matches(rule, f) for f in stack)
        elif rule.where == "leaf":
            hit = any(_frame_matches(rule, f) for f in window)
        elif rule.where == "leaf1":
            hit = leaf is not None and _frame_matches(rule, leaf)
        elif rule.where == "leaf1-python":
            hit = leaf is not None and leaf.python and _frame_matches(rule, leaf)
        elif rule.where == "leaf1-after-python":
            hit = len(stack) >= 2 and stack[-2].python and _frame_matches(rule, stack[-1])
        else:
            hit = any(_frame_matches(rule, f) for f in stack)
        if hit:
            return Verdict(rule.category, rule.library, blocking, rule.id, rule.startup)
    return Verdict(OTHER, None, blocking, "")


def classify_process(process: str, r: Rules | None = None) -> Verdict | None:
    """A verdict from the process name alone (a compiler child), or None."""
    r = r or rules()
    for rule in r.rules:
        if rule.process is not None and rule.process.search(process or ""):
            return Verdict(rule.category, rule.library, False, rule.id)
    return None
