"""The window's Memory fit page: a plan shown from fit's own words, an estimate run off the UI thread, bad input."""

from __future__ import annotations

import pytest

from cpudoctor.render import fit as words
from gui_fill import fit_plan


@pytest.fixture
def page(qtbot):
    from cpudoctor.gui.fit_page import FitPage
    from cpudoctor.gui.model import AppModel

    p = FitPage(AppModel())
    qtbot.addWidget(p)
    return p


def test_a_plan_fills_the_tables_in_fits_words_and_the_first_strategy_is_shown(page):
    plan = fit_plan()
    page.show_plan(plan)
    assert page.verdict.text().startswith(words.verdict(plan))
    assert page.parts_table.rowCount() == len(plan.parts) + 1
    assert page.parts_table.item(len(plan.parts), 0).text() == "in all"
    first = next(s for s in plan.strategies if s.applicable)
    assert page.strategies_table.item(0, 0).text() == words.strategy_title(first)
    assert first.snippet.splitlines()[0] in page.detail.toPlainText() and page.copy_button.isEnabled()


def test_an_estimate_from_a_parameter_count_runs_off_the_ui_thread(page, qtbot):
    page.model_edit.setText("125,000,000")
    page.batch_spin.setValue(8)
    page.memory_edit.setText("1G")
    with qtbot.waitSignal(page.planned, timeout=30_000) as got:
        page.estimate()
        assert not page.run_button.isEnabled() and page.stop_button.isEnabled()
    plan = got.args[0]
    assert plan.source == "parameters" and plan.fits is False
    qtbot.waitUntil(lambda: page.run_button.isEnabled())
    assert "does not fit" in page.verdict.text()


@pytest.mark.parametrize("field, text, said", [("model_edit", "", "module:callable"),
                                               ("memory_edit", "lots", "not a memory limit"),
                                               ("input_edit", "3x0x2", "not a shape")])
def test_bad_input_is_one_line_and_nothing_runs(page, field, text, said):
    page.model_edit.setText("resnet18")
    getattr(page, field).setText(text)
    page.estimate()
    assert said in page.status.text() and page.run_button.isEnabled() and page._worker is None
