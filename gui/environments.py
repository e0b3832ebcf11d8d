"""Which Python environment the window describes and runs the lab's jobs in (no widgets).

The software facts, findings and lab jobs are about one environment: the one
the user trains in, not CPU Doctor's own. :class:`EnvironmentChooser` holds
that choice for the whole window (the model owns one; the toolbar's picker,
the Training page, its PyTorch banner and the Inspector all use it):

* the default, decided off the UI thread when the window opens: the
  environment chosen in the window last time (remembered in QSettings by its
  interpreter) while it is still usable, else what the CLI would describe
  (:func:`~cpudoctor.probes.software.envs.training_environment`:
  ``$CPUDOCTOR_PYTHON``, else the environment the user most likely trains in);
* the listing (:func:`~cpudoctor.probes.software.envs.discover`, cached per
  interpreter), and *Look again*, which lists without the cache;
* a choice from the listing, or an interpreter given by hand (a file dialog,
  the Inspector's "Diagnose this environment"), validated off the UI thread:
  one that cannot be used is one line on ``rejected`` and changes nothing.

Every lookup runs on the thread pool; the newest answer of each kind wins.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QObject, QSettings, Signal

from cpudoctor.gui.workers import run_in_thread
from cpudoctor.probes.software import envs as envs_mod
from cpudoctor.probes.software.envs import EnvError, PythonEnv
from cpudoctor.render import env_choice as words

log = logging.getLogger(__name__)

SETTINGS_KEY = "environment/python"      # the interpreter chosen in the window, remembered between runs
WINDOW = "window"                        # PythonInfo.chosen_by for a choice made here


@dataclass
class EnvLookup:
    """Where environments are looked for: this machine by default; tests give a fake home, working
    folder and variables (the same arguments ``discover`` takes)."""

    environ: Mapping[str, str] | None = None
    home: Path | None = None
    cwd: Path | None = None
    run_conda: bool = True
    cache: bool | Path = True

    def find(self, fresh: bool = False) -> list[PythonEnv]:
        """Every environment found, the likely training one first; ``fresh``: without the cache."""
        return envs_mod.discover(self.environ, self.home, self.cwd, run_conda=self.run_conda,
                                 cache=False if fresh else self.cache)

    def describe(self, python: str) -> PythonEnv:
        """One interpreter (or environment folder), never raising: ``error`` says why it cannot be used."""
        ctx = envs_mod.Context.current(self.environ, self.home, self.cwd)
        return envs_mod.describe(Path(python), "chosen in the window", ctx, cache=self.cache)

    def default(self) -> tuple[PythonEnv | None, str]:
        """What the CLI describes without ``--python``: ``$CPUDOCTOR_PYTHON``, else the active environment, the
        working folder's, the likely one (decided from files, running only the chosen interpreter)."""
        return envs_mod.training_environment(None, environ=self.environ, home=self.home, cwd=self.cwd,
                                             run_conda=self.run_conda, cache=self.cache)

    def decide(self) -> tuple[PythonEnv | None, str]:
        """The default without ``$CPUDOCTOR_PYTHON`` (when that one cannot be used)."""
        return envs_mod.decide_why(self.environ, self.home, self.cwd, cache=self.cache)


def identity(env: PythonEnv) -> str:
    """Two descriptions are one environment when they share a prefix (``bin/python`` and
    ``bin/python3`` of one venv); one whose prefix is unknown is its interpreter."""
    path = env.prefix if env.version is not None else env.python
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):
        return path


def _facts(env: PythonEnv | None) -> tuple | None:
    """What a rebuilt report would differ in: a new torch, numpy or Python in the same environment."""
    if env is None:
        return None
    return identity(env), env.version, env.torch, env.torch_build, env.numpy, env.error


def job_python(env: PythonEnv | None) -> str | None:
    """The interpreter for the lab's jobs: None for CPU Doctor's own (the pipeline's answer, as the CLI's)."""
    from cpudoctor.pipeline import environment_python

    return environment_python(env)


class EnvironmentChooser(QObject):
    """The window's one choice of Python environment; see the module docstring."""

    listed = Signal(list)                  # list[PythonEnv] after each listing (the chosen one always in it)
    looking_changed = Signal(bool)         # a listing or the default is being looked up
    chosen = Signal(object, str)           # PythonEnv | None (nothing usable: CPU Doctor's own), chosen_by
    picked = Signal(object)                # PythonEnv: a choice of the user's was taken (changed or not)
    rejected = Signal(str)                 # one line: why an interpreter given by hand cannot be used
    message = Signal(str)                  # for the status bar

    def __init__(self, parent: QObject | None = None, *, lookup: EnvLookup | None = None,
                 settings: QSettings | None = None):
        super().__init__(parent)
        self.lookup = lookup or EnvLookup()
        self.settings = settings
        self.envs: list[PythonEnv] = []
        self.current: PythonEnv | None = None
        self.chosen_by: str | None = None
        self.decided = False               # a default or a choice has been made
        self.listed_once = False
        self._extra: list[PythonEnv] = []  # chosen by hand, not found by discovery: kept in the listing
        self._started = False
        self._initial_over = False         # the default's decision has ended (well or not)
        self._list_wanted = False          # someone asked for the listing (start, the picker's menu)
        self._listing = 0                  # listings in progress
        self._list_gen = 0
        self._pick_gen = 0
        self._busy = 0

    # -- state ---------------------------------------------------------------------------------

    @property
    def looking(self) -> bool:
        return self._busy > 0

    @property
    def python(self) -> str | None:
        """The interpreter the window's report and jobs use (None: CPU Doctor's own)."""
        return job_python(self.current)

    def _begin(self) -> None:
        self._busy += 1
        if self._busy == 1:
            self.looking_changed.emit(True)

    def _end(self) -> None:
        self._busy = max(0, self._busy - 1)
        if self._busy == 0:
            self.looking_changed.emit(False)

    # -- looking -------------------------------------------------------------------------------

    def start(self) -> None:
        """Decide the default, then list the environments (once; both off the UI thread)."""
        self._list_wanted = True
        if not self._started:
            self.decide_default()
        elif self._initial_over and not self.listed_once and not self._listing:
            self._list(fresh=False)

    def decide_default(self) -> None:
        """Decide the default only (once, off the UI thread); the listing waits for :meth:`start`.

        The window decides this way when it opens: the report needs one environment, and asking every
        interpreter on the machine would compete with it for the CPU. The listing follows when the
        picker's menu opens, the Training page needs it, or the first report is done."""
        if self._started:
            return
        self._started = True
        remembered = self._remembered()
        self._begin()
        self.message.emit(words.LOOKING)
        gen = self._pick_gen
        run_in_thread(_initial_choice, self.lookup, remembered,
                      on_result=lambda answer: self._initial_done(gen, answer),
                      on_error=lambda exc: self._initial_failed(gen, exc),
                      on_finished=self._after_initial)

    def look_again(self) -> None:
        """List the environments again, without the cache (after installing PyTorch, or a new env)."""
        self._list(fresh=True)

    def _list(self, fresh: bool) -> None:
        self._list_gen += 1
        gen = self._list_gen
        self._listing += 1
        self._begin()
        run_in_thread(self.lookup.find, fresh, on_result=lambda envs: self._listed(gen, envs),
                      on_error=lambda exc: self._list_failed(gen, exc), on_finished=self._list_ended)

    def _list_ended(self) -> None:
        self._listing = max(0, self._listing - 1)
        self._end()

    def _after_initial(self) -> None:
        self._initial_over = True
        self._end()
        if self._list_wanted and not self.listed_once and not self._listing:
            self._list(fresh=False)

    def _initial_done(self, gen: int, answer: tuple[PythonEnv | None, str, str]) -> None:
        env, chosen_by, note = answer
        if note:
            self.message.emit(note)
        if gen != self._pick_gen:            # the user chose meanwhile
            return
        self._set(env, chosen_by)

    def _initial_failed(self, gen: int, exc: BaseException) -> None:
        self.message.emit(words.failed_text(exc))
        if gen == self._pick_gen:
            self._set(None, "only-own")

    def _listed(self, gen: int, found: list[PythonEnv]) -> None:
        if gen != self._list_gen:
            return
        self.listed_once = True
        keys = {identity(e) for e in found}
        self._extra = [e for e in self._extra if identity(e) not in keys]
        self.envs = list(found) + self._extra
        fresh_current = self._in_listing(self.current)
        self.listed.emit(list(self.envs))
        if fresh_current is not None and _facts(fresh_current) != _facts(self.current):
            self._set(fresh_current, self.chosen_by or WINDOW)   # torch installed meanwhile: describe it anew
        elif fresh_current is not None:
            self.current = fresh_current

    def _list_failed(self, gen: int, exc: BaseException) -> None:
        if gen == self._list_gen:
            self.message.emit(words.list_failed_text(exc))

    def _in_listing(self, env: PythonEnv | None) -> PythonEnv | None:
        if env is None:
            return None
        key = identity(env)
        return next((e for e in self.envs if identity(e) == key), None)

    # -- choosing ------------------------------------------------------------------------------

    def choose(self, env: PythonEnv) -> bool:
        """The user's choice from the listing; remembered. False (and nothing changes) when it cannot be used."""
        if not env.usable:
            self.rejected.emit(words.rejected_text(env.python, env.error))
            return False
        self._pick_gen += 1
        self._remember(env)
        if not (self.decided and _facts(self._in_listing(env) or env) == _facts(self.current)):
            self._set(env, WINDOW)            # else: the environment described already, nothing to rebuild
        self.picked.emit(self.current)
        return True

    def choose_path(self, python: str) -> None:
        """An interpreter or environment folder given by hand, validated off the UI thread:
        ``chosen`` follows, or ``rejected`` with one line."""
        self._pick_gen += 1
        gen = self._pick_gen
        self._begin()
        self.message.emit(words.checking_text(python))
        run_in_thread(self.lookup.describe, python, on_result=lambda env: self._described(gen, python, env),
                      on_error=lambda exc: self._described_failed(gen, python, exc), on_finished=self._end)

    def _described(self, gen: int, python: str, env: PythonEnv) -> None:
        if gen != self._pick_gen:
            return
        if not env.usable:
            self.rejected.emit(words.rejected_text(python, env.error))
            return
        self._keep_listed(env)
        self.choose(self._in_listing(env) or env)

    def _described_failed(self, gen: int, python: str, exc: BaseException) -> None:
        if gen == self._pick_gen:
            log.warning("describing %s failed", python, exc_info=exc)   # the words say "a bug"; the log says which
            self.rejected.emit(words.rejected_text(python, exc))

    def _set(self, env: PythonEnv | None, chosen_by: str) -> None:
        self._keep_listed(env)
        self.current = self._in_listing(env) or env
        self.chosen_by = chosen_by
        self.decided = True
        self.chosen.emit(self.current, chosen_by)

    def _keep_listed(self, env: PythonEnv | None) -> None:
        """An environment chosen but not found by discovery (given by hand, ``$CPUDOCTOR_PYTHON``) stays listed."""
        if env is None or self._in_listing(env) is not None:
            return
        self._extra.append(env)
        self.envs.append(env)
        if self.listed_once:
            self.listed.emit(list(self.envs))

    # -- remembering ---------------------------------------------------------------------------

    def _remembered(self) -> str | None:
        if self.settings is None:
            return None
        value = self.settings.value(SETTINGS_KEY, "")
        return value if isinstance(value, str) and value.strip() else None

    def _remember(self, env: PythonEnv) -> None:
        if self.settings is not None:
            self.settings.setValue(SETTINGS_KEY, env.python)


def _initial_choice(lookup: EnvLookup, remembered: str | None) -> tuple[PythonEnv | None, str, str]:
    """(environment, how it was chosen, a note for the status bar): the one chosen here last time while
    it is usable, else the CLI's default; a bad ``$CPUDOCTOR_PYTHON`` falls back to the likely one."""
    note = ""
    if remembered:
        env = lookup.describe(remembered)
        if env.usable:
            return env, WINDOW, ""
        note = words.forgotten_text(remembered, env.error)
    try:
        env, chosen_by = lookup.default()
    except EnvError as exc:
        env, chosen_by = lookup.decide()
        note = words.fallback_text(exc, env)
    return env, chosen_by, note
