"""The thread-env allow-list: only tuning variables are listed, only known values shown, LD_PRELOAD loses its paths."""

from cpudoctor.probes.software.envvars import allocator_names, filter_thread_env, preload_names


def test_whitelist_keeps_tuning_vars_and_drops_everything_else():
    env = {
        "OMP_NUM_THREADS": "8",
        "MKL_ENABLE_INSTRUCTIONS": "AVX2",
        "OPENBLAS_CORETYPE": "Haswell",
        "GOTO_NUM_THREADS": "2",
        "KMP_AFFINITY": "granularity=fine,compact,1,0",
        "GOMP_CPU_AFFINITY": "0-3",
        "ATEN_CPU_CAPABILITY": "avx2",
        "DNNL_VERBOSE": "1",
        "ONEDNN_MAX_CPU_ISA": "AVX2",
        "ZENDNN_LOG_OPTS": "ALL:0",
        "TORCH_SHOW_CPP_STACKTRACES": "1",
        "AWS_SECRET_ACCESS_KEY": "hunter2",
        "CPUDOCTOR_TEST_SECRET": "hunter2",
        "HOME": "/home/alice",
        "USER": "alice",
        "PATH": "/home/alice/bin:/usr/bin",
        "OMPI_COMM_WORLD_SIZE": "4",  # Open MPI, not OpenMP: prefix OMP_ does not match OMPI_
    }
    out = filter_thread_env(env)
    assert out == {k: env[k] for k in sorted(env) if k.split("_")[0] in {
        "OMP", "MKL", "OPENBLAS", "GOTO", "KMP", "GOMP", "ATEN", "DNNL", "ONEDNN", "ZENDNN", "TORCH"}}
    assert "hunter2" not in repr(out) and "alice" not in repr(out)


def test_values_are_shown_by_allow_list_only():
    """Unknown variables under a tuning prefix, and known ones with odd values, say "set" (issue 19)."""
    blob = "LICENSE-" + "A1b2C3d4" * 40
    out = filter_thread_env({
        "TORCH_HUB_TOKEN": "hunter2",
        "TORCH_HOME": "/home/alice/.cache/torch",
        "MKL_VERBOSE": "/home/alice/odd",
        "MKL_LICENSE_BLOB": blob,
        "OMP_NUM_THREADS": "8 ; rm -rf ~",
        "KMP_AFFINITY": "\x1b]52;c;aGk=\x07",
        "OMP_PROC_BIND": "close",
        "OMP_PLACES": "{0:4},{4:4}",
        "OMP_NUM_THREADS_NESTED": "4",
    })
    assert out == {"KMP_AFFINITY": "set", "MKL_LICENSE_BLOB": "set", "MKL_VERBOSE": "set", "OMP_NUM_THREADS": "set",
                   "OMP_NUM_THREADS_NESTED": "set", "OMP_PLACES": "{0:4},{4:4}", "OMP_PROC_BIND": "close",
                   "TORCH_HOME": "set", "TORCH_HUB_TOKEN": "set"}
    assert "hunter2" not in repr(out) and "alice" not in repr(out) and "A1b2C3d4" not in repr(out)
    assert filter_thread_env(out) == out              # filtering a filtered environment changes nothing


def test_preload_reduced_to_library_names():
    assert preload_names("/home/x/lib/libjemalloc.so.2") == ["libjemalloc.so.2"]
    assert preload_names("/usr/lib/libtcmalloc.so.4:/opt/intel/libiomp5.so  libfoo.so") == [
        "libtcmalloc.so.4", "libiomp5.so", "libfoo.so"]
    assert preload_names("") == [] and preload_names(None) == []
    out = filter_thread_env({"LD_PRELOAD": "/home/alice/jemalloc/lib/libjemalloc.so.2"})
    assert out == {"LD_PRELOAD": "libjemalloc.so.2"}
    assert allocator_names(["libjemalloc.so.2", "libtcmalloc_minimal.so.4", "libiomp5.so"]) == ["jemalloc", "tcmalloc"]
