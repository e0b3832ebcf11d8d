"""One plural helper for every count a person reads (issue 17: "1 threads")."""

from __future__ import annotations

from cpudoctor.kits.plural import noun, plural


def test_counts_and_nouns():
    assert plural(1, "thread") == "1 thread" and plural(2, "thread") == "2 threads"
    assert plural(0, "variant") == "0 variants" and plural(1.0, "round") == "1 round"
    assert plural(1024, "sample") == "1,024 samples" and plural(1.5, "second") == "1.5 seconds"
    assert plural(3, "process") == "3 processes" and plural(2, "CCX") == "2 CCXs"
    assert plural(2, "physical core") == "2 physical cores" and noun(1, "matrix") == "matrix"
    assert plural(2, "index", "indices") == "2 indices"
