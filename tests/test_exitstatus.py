import signal
import subprocess
import sys

from cpudoctor.kits.child.exitstatus import diagnose_exit


def test_real_sigill_child_is_named_illegal_instruction():
    proc = subprocess.run([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGILL)"])
    d = diagnose_exit(proc.returncode, isa_hint="needs AVX2, CPU lacks it")
    assert proc.returncode == -signal.SIGILL
    assert d.kind == "illegal_instruction" and d.signal_name == "SIGILL"
    assert d.message.startswith("Illegal instruction") and "AVX2" in d.message


def test_shell_style_and_other_statuses():
    assert diagnose_exit(128 + signal.SIGILL).kind == "illegal_instruction"
    assert diagnose_exit(-signal.SIGKILL, memory_hint="23.4 GiB total").kind == "out_of_memory"
    assert diagnose_exit(-signal.SIGSEGV).signal_name == "SIGSEGV"
    d = diagnose_exit(1, stderr_tail="Traceback...\nValueError: boom\n")
    assert d.kind == "error" and d.message.endswith("ValueError: boom")
    assert diagnose_exit(0).kind == "ok"
    assert diagnose_exit(None, timed_out=True).kind == "timeout"
