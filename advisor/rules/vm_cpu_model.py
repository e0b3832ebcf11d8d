"""The VM's CPU model as the cause: a hypervisor that hides the host's vector instruction sets."""

from __future__ import annotations

from cpudoctor.advisor import floors, machine, vm_mask
from cpudoctor.advisor.engine import Facts, rule
from cpudoctor.model import Finding, Report


@rule("ISA009", "vm-cpu-model-hides-isa", category="isa", severity="warning",
      title="The VM's CPU model hides the host's instruction sets")
def vm_cpu_model_hides_isa(report: Report) -> list[Finding]:
    """What it checks:
        A hypervisor (the ``hypervisor`` flag or DMI) together with either a generic CPU model
        that describes no real CPU (QEMU's ``qemu64``/``kvm64`` "QEMU Virtual CPU", "Common KVM
        processor", the TCG "max" model), or a real family/model whose silicon always has flags
        the guest does not see (a Zen 4 without avx512f, a Zen+ or Skylake without fma/avx2, from
        archspec's micro-architecture table). QEMU's named models (Haswell, EPYC-Rome ...) are
        noted: a newer host loses what the model lacks.

    Why it matters:
        Programs choose kernels from the flags they see. Behind a generic or stripped CPU model,
        PyTorch runs its DEFAULT (SSE) kernels instead of AVX2 or AVX512, oneDNN and MKL fall back
        to SSE4 paths, bf16/int8 lose VNNI and AMX, and packages built for AVX (TensorFlow, jaxlib,
        NumPy 2.4 and later) do not run at all — while the host has every one of these.

    Fix:
        Give the VM the host's CPU model: Proxmox ``cpu: host``, libvirt ``<cpu
        mode='host-passthrough'/>``, QEMU ``-cpu host``, VirtualBox ``--cpu-profile host``,
        Hyper-V processor compatibility off, VMware EVC raised or off; in a cloud, an instance type
        whose CPU exposes the instructions. Restart the VM and check ``/proc/cpuinfo``.
    """
    f = Facts(report)
    mask = vm_mask.detect(f)
    if mask is None:
        if (f.get("cpu.hypervisor") or f.get("software.os.vm")) and machine.flags(f) and machine.is_x86(f):
            return [f.finding("ok", "The VM's CPU model shows the instruction sets its micro-architecture has")]
        return []
    flags = machine.flags(f)
    virt = mask.hypervisor
    where = f"This {virt} guest" if virt else "This virtual machine"
    now = vm_mask.torch_kernels(flags)
    fixes = vm_mask.fixes(virt)
    if len(fixes) > 2:  # the hypervisor is unknown: one line per kind, details in the snippet
        fix = ("Give the VM the host's CPU model, then restart it: "
               + "; ".join(f"{row['name']}: {row['short']}" for row in fixes) + ".")
    else:
        fix = " ".join(row["text"] for row in fixes)
    snippet = "\n".join(f"# {row['name']}\n{row['snippet']}" for row in fixes)
    if mask.kind == "named":
        return [f.finding(
            "info", f"The VM uses QEMU's named CPU model '{mask.model}'",
            why=(f"{where} presents QEMU's named model '{mask.model}' instead of the host's CPU. It is complete "
                 "for that generation, but a newer host's instruction sets (AVX-512, VNNI, AMX) stay hidden from "
                 "PyTorch, oneDNN and MKL."),
            fix=fix, snippet=snippet)]
    broken = [x.short for x in floors.forecasts(f) if x.certain]
    if mask.kind == "generic":
        hidden = vm_mask.labels(mask.missing) or "newer instruction sets"
        why = (f"{where} presents {mask.model} ('{f.get('cpu.brand')}') instead of the host's CPU, so programs see "
               f"no {hidden} whatever the host has.")
        gain = ("PyTorch runs its DEFAULT (SSE) kernels; on most x86 hosts since 2013 (AVX2 and FMA) it would run "
                "AVX2 kernels, up to twice as fast per operator, and AVX512 on AVX-512 hosts." if now == "DEFAULT"
                else f"PyTorch runs its {now} kernels; an AVX-512 host would allow AVX512 kernels and VNNI/bf16 paths.")
        severity = "warning" if now == "DEFAULT" else "info"
    else:
        hidden = vm_mask.labels(mask.missing)
        host = vm_mask.torch_kernels(flags | set(mask.missing))
        why = (f"{where} runs on {mask.model} silicon (decoded from family {f.get('cpu.family')} model "
               f"{f.get('cpu.model')}), which has {hidden}, but the guest does not see "
               f"{'it' if len(mask.missing) == 1 else 'them'}: the VM's CPU model or a compatibility mode "
               "strips them.")
        gain = (f"PyTorch runs its {now} kernels instead of {host}." if host != now else
                "PyTorch's kernel choice is unchanged, but oneDNN and MKL lose the hidden instructions "
                "(bf16 and int8 paths, F16C conversions).")
        severity = "warning" if mask.hides_kernels or host != now else "info"
    why += " " + gain
    if broken:
        why += f" Builds that need the hidden instructions do not run here at all: {', '.join(broken)}."
    return [f.finding(severity, f"The VM's CPU model hides {hidden} from programs", why=why, fix=fix,
                      snippet=snippet)]
