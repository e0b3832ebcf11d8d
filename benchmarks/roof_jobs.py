"""Issue 36 on real jobs: a ResNet-style job and an MLP at batch 8 held against one measured roof, and each roof
finding's printed fix applied and measured (the finding gone, the rate moved).

The roof is measured once (the quick measurement `cpudoctor run` makes when none is saved) and kept where the
window keeps its lab runs (a temporary XDG_CONFIG_HOME), so every run is held against the same roof. Each job
runs under `cpudoctor run --format json`, bad and fixed interleaved (ABBA), 5 s each; the table shows per job
its main kind's intensity, rate, share of the roof, bound, the whole job's share of the CPU's compute, the roof
findings, samples per second, and the job's own CPU milliseconds per sample (what it spent itself, the
steadier figure on a machine others keep busy).

Run: python benchmarks/roof_jobs.py [ROUNDS]
"""

from __future__ import annotations

import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JOBS = ROOT / "tests" / "jobs"
# (name, job, args, extra env, samples per step): each bad job beside the fix its finding prints
CASES = [
    ("MLP batch 8, 2 threads", "mlp_batch8.py", [], {"OMP_NUM_THREADS": "2"}, 8),
    ("  fix EVID020: batch 128", "mlp_batch8.py", ["--fixed"], {"OMP_NUM_THREADS": "2"}, 128),
    ("  fix EVID021: 1 thread", "mlp_batch8.py", [], {"OMP_NUM_THREADS": "1"}, 8),
    ("  both: batch 128, 1 thread", "mlp_batch8.py", ["--fixed"], {"OMP_NUM_THREADS": "1"}, 128),
    ("ResNet-style NCHW", "resnet_small.py", [], {"OMP_NUM_THREADS": "2"}, 32),
    ("  fix EVID022: channels_last", "resnet_small.py", ["--fixed"], {"OMP_NUM_THREADS": "2"}, 32),
]
MAIN_KIND = {"mlp_batch8.py": "linear", "resnet_small.py": "convolution"}


def keep_roof(config: Path) -> dict:
    from cpudoctor.lab import job_roofs
    from cpudoctor.model import BenchRun
    from cpudoctor.model.serde import to_data

    roofs = job_roofs.quick(["fp32"], 2)
    metrics = {"compute": [{"dtype": r.dtype, "threads": r.threads, "gflops": r.gflops,
                            "other_share": r.other_share} for r in roofs.compute],
               "memory": [{"node": "all", "kernel": "copy", "gbps": roofs.memory_gbps}]}
    kept = config / "CPU Doctor" / "lab-runs.json"
    kept.parent.mkdir(parents=True, exist_ok=True)
    kept.write_text(json.dumps({"version": 1, "runs": {f"{socket.gethostname()} | bench | py": [
        to_data(BenchRun(kind="roofline", metrics=metrics, started_at=roofs.measured_at))]}}))
    return metrics


def run(job: str, args: list[str], extra: dict[str, str], config: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "ONEDNN_", "MKL_"))}
    env.update(extra, XDG_CONFIG_HOME=str(config))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.json"
        proc = subprocess.run([sys.executable, "-m", "cpudoctor", "run", "--format", "json", "-o", str(out), "--",
                               sys.executable, str(JOBS / job), "--seconds", "5", *args],
                              cwd=JOBS, env=env, capture_output=True, text=True, timeout=300)
        data = json.loads(out.read_text())
    m = re.search(r"steps_per_s=([\d.]+)", proc.stdout)
    cpu = re.search(r"cpu_ms_per_step=([\d.]+)", proc.stdout)
    data["steps_per_s"] = float(m.group(1)) if m else None
    data["cpu_ms_per_step"] = float(cpu.group(1)) if cpu else None
    return data


def main(rounds: int = 2) -> None:
    with tempfile.TemporaryDirectory() as config_dir:
        config = Path(config_dir)
        roof = keep_roof(config)
        print("roof:", ", ".join(f"fp32 {c['gflops']:.1f} GFLOP/s on {c['threads']} thread(s)"
                                 for c in roof["compute"]), f"; memory {roof['memory'][0]['gbps']:.1f} GB/s")
        results: dict[str, list[dict]] = {c[0]: [] for c in CASES}
        loads = []
        for r in range(rounds):
            for case in CASES if r % 2 == 0 else list(reversed(CASES)):
                name, job, args, extra, _per = case
                results[name].append(run(job, args, extra, config))
                loads.append(os.getloadavg()[0])
        print(f"{rounds} interleaved rounds, load average {min(loads):.1f}..{max(loads):.1f} on {os.cpu_count()} CPUs")
        print(f"{'job':<30} {'kind':<12} {'FLOP/B':>7} {'GFLOP/s':>8} {'of roof':>8} {'bound':>8} {'CPU used':>9} "
              f"{'samples/s':>10} {'CPU ms/sample':>14}  roof findings")
        for name, job, _args, _extra, per in CASES:
            runs = results[name]
            kinds = [next((k for k in (d.get("achieved") or {}).get("kinds", []) if k["kind"] == MAIN_KIND[job]), None)
                     for d in runs]
            kinds = [k for k in kinds if k]
            med = lambda key: statistics.median([k[key] for k in kinds if k.get(key) is not None] or [0])  # noqa: E731
            cpu = statistics.median([(d.get("achieved") or {}).get("cpu_share") or 0 for d in runs])
            rate = statistics.median([(d["steps_per_s"] or 0) * per for d in runs])
            cpu_ms = statistics.median([(d["cpu_ms_per_step"] or 0) / per for d in runs])
            codes = sorted({f["code"] for d in runs for f in d["findings"] if f["code"] in ("EVID020", "EVID021",
                                                                                           "EVID022")})
            bound = "memory" if kinds and kinds[0].get("memory_bound") else "compute"
            print(f"{name:<30} {MAIN_KIND[job]:<12} {med('intensity'):>7.1f} {med('gflops'):>8.2f} "
                  f"{med('of_roof') * 100:>7.1f}% {bound:>8} {cpu * 100:>8.2f}% {rate:>10.0f} {cpu_ms:>14.3f}  "
                  f"{' '.join(codes) or '-'}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
