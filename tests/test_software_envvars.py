"""The thread-env whitelist: only tuning variables survive, LD_PRELOAD loses its paths."""

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


def test_secret_or_path_values_under_whitelisted_prefixes_are_not_copied():
    out = filter_thread_env({
        "TORCH_HUB_TOKEN": "hunter2",
        "TORCH_HOME": "/home/alice/.cache/torch",
        "MKL_VERBOSE": "/home/alice/odd",
        "OMP_PROC_BIND": "close",
    })
    assert "TORCH_HUB_TOKEN" not in out
    assert out["TORCH_HOME"] == "<path>" and out["MKL_VERBOSE"] == "<path>"
    assert out["OMP_PROC_BIND"] == "close"


def test_preload_reduced_to_library_names():
    assert preload_names("/home/x/lib/libjemalloc.so.2") == ["libjemalloc.so.2"]
    assert preload_names("/usr/lib/libtcmalloc.so.4:/opt/intel/libiomp5.so  libfoo.so") == [
        "libtcmalloc.so.4", "libiomp5.so", "libfoo.so"]
    assert preload_names("") == [] and preload_names(None) == []
    out = filter_thread_env({"LD_PRELOAD": "/home/alice/jemalloc/lib/libjemalloc.so.2"})
    assert out == {"LD_PRELOAD": "libjemalloc.so.2"}
    assert allocator_names(["libjemalloc.so.2", "libtcmalloc_minimal.so.4", "libiomp5.so"]) == ["jemalloc", "tcmalloc"]
