"""No environment has PyTorch: the install command for this CPU, and the Training page's banner."""

from __future__ import annotations

import pytest

from cpudoctor.advisor.torch_setup import NEW_ENV_NAME, install_target, normalise_arch, torch_setup
from cpudoctor.probes.software.envs import PythonEnv
from cpudoctor.render.envs import torch_missing_text


def _shown(qtbot, banner):
    """The banner inside a shown window, as on the Training page."""
    from PySide6.QtWidgets import QVBoxLayout, QWidget

    holder = QWidget()
    QVBoxLayout(holder).addWidget(banner)
    qtbot.addWidget(holder)
    holder.show()
    return holder, banner

CPU_INDEX = "--index-url https://download.pytorch.org/whl/cpu"


def env(name: str, kind: str = "venv", torch: str | None = None, **kw) -> PythonEnv:
    return PythonEnv(python=f"/home/ann/{name}/bin/python", prefix=f"/home/ann/{name}", kind=kind, name=name,
                     version="3.12.3", torch=torch, **kw)


def test_an_environment_with_torch_needs_no_command():
    s = torch_setup([env("plain"), env("dl", torch="2.5.1+cpu")], "Linux", "x86_64")
    assert s.has_torch and [e.name for e in s.with_torch] == ["dl"] and s.command == ""


def test_pipx_and_broken_environments_do_not_count_as_having_torch():
    s = torch_setup([env("tool", kind="pipx", torch="2.5.1"), env("bad", torch="2.5.1", error="no such file")],
                    "Linux", "x86_64")
    assert not s.has_torch


@pytest.mark.parametrize("os_name, machine", [("Linux", "x86_64"), ("Linux", "aarch64"), ("Linux", "arm64"),
                                              ("Windows", "AMD64")])
def test_linux_and_windows_get_the_cpu_index(os_name, machine):
    s = torch_setup([env("project", numpy="2.1.0")], os_name, machine)
    assert s.supported and s.target is not None and s.target.name == "project"
    assert s.command == f"/home/ann/project/bin/python -m pip install torch {CPU_INDEX}"


def test_paths_with_spaces_are_quoted_for_the_shell():
    spaced = PythonEnv(python="/home/ann/my envs/dl/bin/python", prefix="/home/ann/my envs/dl", kind="conda",
                       name="dl", version="3.11.9")
    assert torch_setup([spaced], "Linux", "x86_64").command.startswith("'/home/ann/my envs/dl/bin/python' -m pip")
    win = PythonEnv(python=r"C:\Users\Ann\my envs\dl\python.exe", prefix=r"C:\Users\Ann\my envs\dl", kind="conda",
                    name="dl", version="3.11.9")
    assert torch_setup([win], "Windows", "AMD64").command.startswith(r'"C:\Users\Ann\my envs\dl\python.exe" -m pip')


def test_macs_use_pypi_and_intel_macs_the_last_release_built_for_them():
    arm = torch_setup([env("p")], "Darwin", "arm64")
    assert arm.command.endswith("-m pip install torch") and "index-url" not in arm.command and arm.note
    intel = torch_setup([env("p")], "Darwin", "x86_64")
    assert intel.command.endswith("-m pip install torch==2.2.2") and "2.2.2" in intel.note


def test_no_fit_environment_gets_a_new_venv():
    # System Pythons refuse pip (PEP 668), pipx venvs are tools, CPU Doctor's own is not the user's.
    envs = [env("python3", kind="system"), env("black", kind="pipx"), env("cpudoctor", own=True)]
    assert install_target(envs) is None
    s = torch_setup(envs, "Linux", "x86_64")
    assert s.target is None
    assert s.command == f"python3 -m venv ~/{NEW_ENV_NAME} && ~/{NEW_ENV_NAME}/bin/python -m pip install torch {CPU_INDEX}"
    win = torch_setup([], "Windows", "AMD64")
    assert win.command.startswith(rf"py -m venv %USERPROFILE%\{NEW_ENV_NAME} && ")
    assert win.command.endswith(rf"\Scripts\python -m pip install torch {CPU_INDEX}")


def test_an_architecture_without_official_builds_gets_no_command():
    s = torch_setup([env("p")], "Linux", "riscv64")
    assert not s.supported and s.command == ""
    headline, detail = torch_missing_text(s)
    assert "No Python environment with PyTorch" in headline and "riscv64" in detail and "source" in detail


def test_the_words_name_where_it_installs():
    _, detail = torch_missing_text(torch_setup([env("project")], "Linux", "x86_64"))
    assert "project" in detail and "CPU build" in detail
    _, detail = torch_missing_text(torch_setup([], "Linux", "x86_64"))
    assert NEW_ENV_NAME in detail


def test_architecture_names_are_normalised():
    assert normalise_arch("AMD64", "Windows") == "x86_64"
    assert normalise_arch("arm64", "Linux") == "aarch64"
    assert normalise_arch("arm64", "Darwin") == "arm64"


# ---------------------------------------------------------------- the Training page's banner


class FakeLookup:
    """What an EnvironmentChooser finds: one list of environments per look (the last one stays)."""

    def __init__(self, *looks: list[PythonEnv]):
        self.looks = list(looks)

    def find(self, fresh: bool = False) -> list[PythonEnv]:
        return self.looks.pop(0) if len(self.looks) > 1 else self.looks[0]

    def describe(self, python: str) -> PythonEnv:
        known = [e for e in self.looks[0] if e.python == python]
        return known[0] if known else PythonEnv(python=python, prefix=python, kind="system", name=python,
                                                error="no such file")

    def default(self):
        from cpudoctor.probes.software.envs import likely_training_env

        found = likely_training_env(self.looks[0])
        return found, "likely" if found is not None else "only-own"


def _banner(qtbot, *looks):
    from cpudoctor.gui.environments import EnvironmentChooser
    from cpudoctor.gui.torch_banner import TorchMissingBanner

    chooser = EnvironmentChooser(lookup=FakeLookup(*looks))
    holder, banner = _shown(qtbot, TorchMissingBanner(chooser, system=lambda: ("Linux", "x86_64")))
    chooser.setParent(holder)                             # lives as long as the widget
    return holder, chooser, banner


def test_banner_offers_the_command_for_the_chosen_environment(qtbot):
    _holder, chooser, banner = _banner(qtbot, [env("project")])
    assert not banner.isVisible()                        # nothing said before the environment is known
    with qtbot.waitSignal(banner.checked, timeout=30_000):
        banner.look_once()
    assert banner.isVisible()
    assert banner.command.text() == f"/home/ann/project/bin/python -m pip install torch {CPU_INDEX}"
    assert "project (venv, Python 3.12.3) has no PyTorch" in banner.text.text()
    assert "into this environment" in banner.text.text()
    banner.copy_command()
    from PySide6.QtGui import QGuiApplication

    assert QGuiApplication.clipboard().text() == banner.command.text()


def test_banner_names_environments_that_have_torch_when_the_chosen_one_has_not(qtbot):
    _holder, chooser, banner = _banner(qtbot, [env("dl", torch="2.5.1+cpu"), env("plain")])
    with qtbot.waitSignal(banner.checked, timeout=30_000):
        banner.look_once()
    assert not banner.isVisible() and chooser.current.name == "dl"     # the default has torch
    plain = next(e for e in chooser.envs if e.name == "plain")
    with qtbot.waitSignal(banner.checked, timeout=30_000):
        chooser.choose(plain)
    assert banner.isVisible()
    text = banner.text.text()
    assert "plain (venv, Python 3.12.3) has no PyTorch" in text and "(dl)" in text and "toolbar" in text
    assert banner.command.text().startswith("/home/ann/plain/bin/python -m pip install torch")


def test_banner_for_a_system_python_installs_into_a_new_environment(qtbot):
    _holder, chooser, banner = _banner(qtbot, [env("python3", kind="system")])
    with qtbot.waitSignal(banner.checked, timeout=30_000):
        banner.look_once()
    assert banner.isVisible() and banner.command.text().startswith(f"python3 -m venv ~/{NEW_ENV_NAME} && ")
    assert "pip refuses" in banner.text.text()


def test_banner_when_nothing_usable_was_found(qtbot):
    _holder, chooser, banner = _banner(qtbot, [env("old", error="Python 2.7.18 is too old")])
    with qtbot.waitSignal(banner.checked, timeout=30_000):
        banner.look_once()
    assert chooser.current is None and banner.isVisible()
    assert "No Python environment with PyTorch" in banner.text.text() and NEW_ENV_NAME in banner.command.text()


def test_banner_hides_once_torch_is_installed(qtbot):
    _holder, chooser, banner = _banner(qtbot, [env("project")], [env("project", torch="2.5.1+cpu")])
    with qtbot.waitSignal(banner.checked, timeout=30_000):
        banner.look_once()
    assert banner.isVisible()
    # the listing's result arrives before its end: Look again is enabled once the lookup has ended
    qtbot.waitUntil(lambda: banner.again_button.isEnabled(), timeout=5000)
    with qtbot.waitSignal(chooser.chosen, timeout=30_000):   # the same environment, now with torch: described anew
        banner.again_button.click()
    assert not banner.isVisible() and banner.setup.has_torch and chooser.current.torch == "2.5.1+cpu"


def test_training_page_looks_when_first_shown(qtbot):
    from cpudoctor.gui.model import AppModel
    from cpudoctor.gui.training_page import TrainingPage

    model = AppModel()
    model.environments.lookup = FakeLookup([])
    page = TrainingPage(model)
    qtbot.addWidget(page)
    page.torch_banner.system = lambda: ("Linux", "x86_64")
    with qtbot.waitSignal(page.torch_banner.checked, timeout=5000):
        page.show()
    assert page.torch_banner.isVisible() and "venv" in page.torch_banner.command.text()
    page.shutdown()
