"""The raw buffer of ``GetLogicalProcessorInformationEx(RelationAll)``, parsed without Windows.

Windows describes its processors as a packed list of
``SYSTEM_LOGICAL_PROCESSOR_INFORMATION_EX`` records (winnt.h): one per core,
package, die, module, cache, NUMA node, and one for the processor groups. Each
record says which logical processors it covers as ``GROUP_AFFINITY`` masks:
64-bit masks qualified by a processor group, because one Windows mask holds at
most 64 processors. This module reads that buffer as bytes, so a buffer
recorded on a Windows machine (a capture's
``windows/logical-processor-information-ex.bin``) is parsed the same on Linux,
macOS or Windows; :mod:`._windows_api` is the ctypes caller that fills it on
Windows.

Layouts (x64, offsets from the start of each record)::

    0  DWORD Relationship        0 core, 1 NUMA node, 2 cache, 3 package, 4 group, 5 die, 7 module
    4  DWORD Size                of this record, header included
    8  PROCESSOR_RELATIONSHIP    BYTE Flags (1 = SMT), BYTE EfficiencyClass, BYTE Reserved[20],
                                 WORD GroupCount (at 30), GROUP_AFFINITY GroupMask[] (at 32)
    8  NUMA_NODE_RELATIONSHIP    DWORD NodeNumber, BYTE Reserved[18], WORD GroupCount (at 30),
                                 GROUP_AFFINITY GroupMasks[] (at 32)
    8  CACHE_RELATIONSHIP        BYTE Level, BYTE Associativity, WORD LineSize, DWORD CacheSize,
                                 DWORD Type (0 unified, 1 instruction, 2 data, 3 trace),
                                 BYTE Reserved[18], WORD GroupCount (at 38), GROUP_AFFINITY GroupMasks[] (at 40)
    8  GROUP_RELATIONSHIP        WORD MaximumGroupCount, WORD ActiveGroupCount, BYTE Reserved[20],
                                 PROCESSOR_GROUP_INFO GroupInfo[] (at 32): BYTE MaximumProcessorCount,
                                 BYTE ActiveProcessorCount, BYTE Reserved[38], KAFFINITY ActiveProcessorMask
    GROUP_AFFINITY = KAFFINITY Mask (8 bytes), WORD Group, WORD Reserved[3]: 16 bytes

Before Windows 11 / Server 2022 the NUMA and cache records had no
``GroupCount`` (those bytes were reserved, so zero) and exactly one mask;
Wine leaves them unset too. A count of zero therefore means one, and a count
larger than the record holds is cut to what the record's ``Size`` holds.

Logical processor numbers: Windows names a processor by (group, bit). The
report numbers them globally, group by group: group ``g`` starts after the
``MaximumProcessorCount`` of the groups before it (Task Manager's order), so
on a machine with one group the numbers are the mask bits. A buffer whose
masks do not fit its group sizes is numbered ``64 * group + bit`` instead.
Pure functions, no I/O.

Bounds: a buffer is read up to :data:`MAX_BUFFER` bytes and :data:`MAX_RECORDS`
records; at most :data:`MAX_GROUPS` processor groups (:data:`MAX_CPUS` logical
processors, as many as the Linux probe reads) and :data:`MAX_NUMA_NODES` nodes
are kept, each record's masks are merged per group, and a note says what was
left out. A capture a few hundred kB long once claimed 5,000 NUMA nodes (merged
by a linear search each), 16,384 groups or records of 65,535 masks each, and
``report --root`` ran for minutes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

RELATION_CORE = 0
RELATION_NUMA = 1
RELATION_CACHE = 2
RELATION_PACKAGE = 3
RELATION_GROUP = 4
RELATION_DIE = 5
RELATION_NUMA_EX = 6
RELATION_MODULE = 7
RELATION_ALL = 0xFFFF

LTP_PC_SMT = 1
CACHE_TYPES = {0: "unified", 1: "instruction", 2: "data", 3: "trace"}
GROUP_BITS = 64                       # one KAFFINITY mask: at most 64 processors per group
MAX_BUFFER = 4 << 20                  # 32,768 processors need well under 1 MiB
MAX_RECORDS = 1 << 16                 # 8,192 CPUs: a core, three caches and a few more records each
# As many CPUs as the Linux probe reads (kits.rooted.MAX_NUMBERED_DIRS; Windows itself stops at 2,048), in
# groups of at most 64; NUMA nodes as on Linux (kits.cpulist.MAX_NUMA_NODES).
MAX_CPUS = 8192
MAX_GROUPS = MAX_CPUS // 64
MAX_NUMA_NODES = 1024
_HEADER = 8
_GROUP_AFFINITY = 16
_GROUP_INFO = 48
_MASK_AT = {RELATION_CORE: 32, RELATION_PACKAGE: 32, RELATION_DIE: 32, RELATION_MODULE: 32,
            RELATION_NUMA: 32, RELATION_NUMA_EX: 32, RELATION_CACHE: 40}
_COUNT_AT = {RELATION_CORE: 30, RELATION_PACKAGE: 30, RELATION_DIE: 30, RELATION_MODULE: 30,
             RELATION_NUMA: 30, RELATION_NUMA_EX: 30, RELATION_CACHE: 38}
_PROCESSOR_KINDS = {RELATION_CORE: "core", RELATION_PACKAGE: "package", RELATION_DIE: "die",
                    RELATION_MODULE: "module"}


@dataclass(frozen=True)
class GroupMask:
    """One ``GROUP_AFFINITY``: the processors ``mask`` of processor group ``group``."""

    group: int
    mask: int

    def bits(self) -> list[int]:
        return list(_bits(self.mask))


def _bits(mask: int) -> tuple[int, ...]:
    """The set bits of a 64-bit mask, remembered (a machine repeats a few masks thousands of times)."""
    found = _BITS.get(mask)
    if found is None:
        found = tuple(b for b in range(GROUP_BITS) if mask >> b & 1)
        if len(_BITS) < 1 << 16:
            _BITS[mask] = found
    return found


_BITS: dict[int, tuple[int, ...]] = {}


@dataclass
class ProcessorRecord:
    """A core, package, die or module (``PROCESSOR_RELATIONSHIP``)."""

    kind: str                              # core | package | die | module
    masks: list[GroupMask]
    smt: bool = False                      # LTP_PC_SMT: more than one logical processor per core
    efficiency_class: int = 0              # 0 on uniform chips; higher = faster core (P-cores)


@dataclass
class CacheRecord:
    level: int
    type: str                              # unified | instruction | data | trace | unknown
    size_bytes: int
    line_size: int
    associativity: int                     # 0xFF = fully associative
    masks: list[GroupMask]


@dataclass
class NumaRecord:
    node: int
    masks: list[GroupMask]


@dataclass
class GroupInfo:
    maximum: int                           # MaximumProcessorCount
    active: int                            # ActiveProcessorCount
    mask: int                              # ActiveProcessorMask


@dataclass
class LogicalProcessorInfo:
    """Everything in one buffer, in the order Windows listed it."""

    cores: list[ProcessorRecord] = field(default_factory=list)
    packages: list[ProcessorRecord] = field(default_factory=list)
    dies: list[ProcessorRecord] = field(default_factory=list)
    modules: list[ProcessorRecord] = field(default_factory=list)
    caches: list[CacheRecord] = field(default_factory=list)
    numa_nodes: list[NumaRecord] = field(default_factory=list)
    groups: list[GroupInfo] = field(default_factory=list)
    maximum_groups: int | None = None
    records: int = 0
    notes: list[str] = field(default_factory=list)
    _offsets: list[int] | None = None
    _node_index: dict[int, NumaRecord] = field(default_factory=dict)
    _dropped: dict[str, int] = field(default_factory=dict)      # what the bounds left out, by kind

    # -- processor numbers ----------------------------------------------------------------
    def group_offsets(self) -> list[int]:
        """The global number of bit 0 of each group (see the module docstring)."""
        if self._offsets is None:
            self._offsets = self._compute_offsets()
        return self._offsets

    def _compute_offsets(self) -> list[int]:
        count = max([len(self.groups)] + [m.group + 1 for m in self._all_masks()])
        sizes = [g.maximum for g in self.groups] + [0] * (count - len(self.groups))
        fits = bool(self.groups) and all(
            m.group < len(sizes) and m.mask < (1 << sizes[m.group]) for m in self._all_masks())
        if not fits:
            if self.groups:
                self.notes.append("processor masks do not fit the group sizes Windows reports: "
                                  "processors are numbered 64 x group + bit")
            return [GROUP_BITS * g for g in range(count)]
        offsets, start = [], 0
        for size in sizes:
            offsets.append(start)
            start += size
        return offsets

    def _all_masks(self):
        for rec in (*self.cores, *self.packages, *self.dies, *self.modules):
            yield from rec.masks
        for cache in self.caches:
            yield from cache.masks
        for node in self.numa_nodes:
            yield from node.masks
        for i, g in enumerate(self.groups):
            yield GroupMask(i, g.mask)

    def cpus(self, masks: list[GroupMask]) -> list[int]:
        """Global logical processor numbers of ``masks``, sorted."""
        offsets = self.group_offsets()
        return sorted({offsets[m.group] + b for m in masks if m.group < len(offsets) for b in _bits(m.mask)})

    def group_of(self, cpu: int) -> tuple[int, int]:
        """(group, bit) of a global processor number."""
        offsets = self.group_offsets()
        for g in range(len(offsets) - 1, -1, -1):
            if cpu >= offsets[g]:
                return g, cpu - offsets[g]
        raise ValueError(f"processor {cpu} is in no group")

    def active_cpus(self) -> list[int]:
        """Every active logical processor: the group record's masks, else the cores'."""
        if self.groups:
            return self.cpus([GroupMask(i, g.mask) for i, g in enumerate(self.groups)])
        return sorted({c for core in self.cores for c in self.cpus(core.masks)})


def parse(buffer: bytes) -> LogicalProcessorInfo:
    """Parse a ``GetLogicalProcessorInformationEx(RelationAll)`` buffer; never raises.

    A damaged buffer (a record whose size runs past the end, a size too small
    to hold its header) stops the walk there with a note: the records before
    it are kept.
    """
    info = LogicalProcessorInfo()
    data = memoryview(bytes(buffer[:MAX_BUFFER]))
    if len(buffer) > MAX_BUFFER:
        info.notes.append(f"the buffer is {len(buffer):,} bytes, more than any machine writes: "
                          f"only the first {MAX_BUFFER:,} were read")
    offset = 0
    while offset < len(data):
        if info.records >= MAX_RECORDS:
            info.notes.append(f"more than {MAX_RECORDS:,} records: the rest were ignored")
            break
        if len(data) - offset < _HEADER:
            info.notes.append(f"{len(data) - offset} stray bytes at the end of the buffer: ignored")
            break
        relation, size = struct.unpack_from("<II", data, offset)
        if size < _HEADER or offset + size > len(data):
            info.notes.append(f"record {info.records} at byte {offset} claims {size} bytes "
                              f"({len(data) - offset} left): the buffer is damaged from there on")
            break
        record = data[offset:offset + size]
        info.records += 1
        offset += size
        try:
            _add(info, relation, record)
        except struct.error:
            info.notes.append(f"record {info.records - 1} (relationship {relation}) is too short "
                              f"({size} bytes): ignored")
    words = {"groups": f"processor groups beyond the first {MAX_GROUPS} ({MAX_CPUS:,} CPUs)",
             "masks": f"group masks naming a group beyond the first {MAX_GROUPS}",
             "nodes": f"NUMA nodes beyond the first {MAX_NUMA_NODES:,}",
             "sizes": f"group sizes above {GROUP_BITS} processors",
             "numbers": f"NUMA node numbers of {MAX_NUMA_NODES:,} or more"}
    for kind, count in info._dropped.items():
        info.notes.append(f"{count:,} {words[kind]} were ignored: no machine has that many; the capture is "
                          "damaged or made up")
    return info


def _drop(info: LogicalProcessorInfo, kind: str, count: int = 1) -> None:
    info._dropped[kind] = info._dropped.get(kind, 0) + count


def _masks(info: LogicalProcessorInfo, record: memoryview, relation: int) -> list[GroupMask]:
    """The record's masks, one per group (masks of the same group merged), groups past MAX_GROUPS dropped."""
    at = _MASK_AT[relation]
    (count,) = struct.unpack_from("<H", record, _COUNT_AT[relation])
    room = max(0, (len(record) - at) // _GROUP_AFFINITY)
    if room == 0:
        raise struct.error("no room for a group mask")
    count = min(count or 1, room)              # 0: Windows 10 and Wine left the field reserved
    by_group: dict[int, int] = {}
    dropped = 0
    for mask, group in struct.iter_unpack("<QH6x", record[at:at + count * _GROUP_AFFINITY]):
        if group >= MAX_GROUPS:
            dropped += 1
        else:
            by_group[group] = by_group.get(group, 0) | mask
    if dropped:
        _drop(info, "masks", dropped)
    return [GroupMask(g, m) for g, m in by_group.items()]


def _add(info: LogicalProcessorInfo, relation: int, record: memoryview) -> None:
    if relation in _PROCESSOR_KINDS:
        flags, efficiency = struct.unpack_from("<BB", record, _HEADER)
        rec = ProcessorRecord(_PROCESSOR_KINDS[relation], _masks(info, record, relation),
                              smt=bool(flags & LTP_PC_SMT), efficiency_class=efficiency)
        {"core": info.cores, "package": info.packages, "die": info.dies,
         "module": info.modules}[rec.kind].append(rec)
    elif relation == RELATION_CACHE:
        level, assoc, line, size, kind = struct.unpack_from("<BBHII", record, _HEADER)
        info.caches.append(CacheRecord(level, CACHE_TYPES.get(kind, "unknown"), size, line, assoc,
                                       _masks(info, record, relation)))
    elif relation in (RELATION_NUMA, RELATION_NUMA_EX):
        (node,) = struct.unpack_from("<I", record, _HEADER)
        if node >= MAX_NUMA_NODES:               # a DWORD, but no system numbers a node that high
            _drop(info, "numbers")
            return
        masks = _masks(info, record, relation)
        existing = info._node_index.get(node)          # looked up by number: thousands of nodes stay linear
        if existing is None:
            if len(info.numa_nodes) >= MAX_NUMA_NODES:
                _drop(info, "nodes")
                return
            existing = info._node_index[node] = NumaRecord(node, masks)
            info.numa_nodes.append(existing)
        else:                                  # RelationNumaNodeEx repeats a node with all its groups
            existing.masks = list(dict.fromkeys(existing.masks + masks))
    elif relation == RELATION_GROUP:
        maximum, active = struct.unpack_from("<HH", record, _HEADER)
        info.maximum_groups = maximum
        room = max(0, (len(record) - 32) // _GROUP_INFO)
        for i in range(min(active, room, MAX_GROUPS)):
            at = 32 + i * _GROUP_INFO
            most, act = struct.unpack_from("<BB", record, at)
            (mask,) = struct.unpack_from("<Q", record, at + 40)
            if most > GROUP_BITS or act > GROUP_BITS:      # a BYTE, but a group holds 64 processors at most
                _drop(info, "sizes")
                most, act = min(most, GROUP_BITS), min(act, GROUP_BITS)
            info.groups.append(GroupInfo(most, act, mask))
        if active > room:
            info.notes.append(f"the group record lists {active} groups but holds {room}: the rest are unknown")
        if min(active, room) > MAX_GROUPS:
            _drop(info, "groups", min(active, room) - MAX_GROUPS)
    # Other relationships (future ones) are skipped: their Size still moves the walk on.


# -- writing buffers (tests and the recording tool build multi-group machines with this) -------------


def _affinity(masks: list[GroupMask]) -> bytes:
    return b"".join(struct.pack("<QH6x", m.mask, m.group) for m in masks)


def _record(relation: int, body: bytes) -> bytes:
    size = _HEADER + len(body)
    size += -size % 8                          # records are 8-byte aligned (KAFFINITY members)
    return struct.pack("<II", relation, size) + body + b"\0" * (size - _HEADER - len(body))


def encode_processor(kind: str, masks: list[GroupMask], *, smt: bool = False, efficiency_class: int = 0) -> bytes:
    relation = {v: k for k, v in _PROCESSOR_KINDS.items()}[kind]
    body = struct.pack("<BB20xH", LTP_PC_SMT if smt else 0, efficiency_class, len(masks)) + _affinity(masks)
    return _record(relation, body)


def encode_cache(level: int, kind: str, size_bytes: int, masks: list[GroupMask], *, line_size: int = 64,
                 associativity: int = 8) -> bytes:
    code = {v: k for k, v in CACHE_TYPES.items()}[kind]
    body = struct.pack("<BBHII18xH", level, associativity, line_size, size_bytes, code, len(masks))
    return _record(RELATION_CACHE, body + _affinity(masks))


def encode_numa(node: int, masks: list[GroupMask]) -> bytes:
    return _record(RELATION_NUMA, struct.pack("<I18xH", node, len(masks)) + _affinity(masks))


def encode_groups(groups: list[GroupInfo], maximum_groups: int | None = None) -> bytes:
    body = struct.pack("<HH20x", maximum_groups if maximum_groups is not None else len(groups), len(groups))
    body += b"".join(struct.pack("<BB38xQ", g.maximum, g.active, g.mask) for g in groups)
    return _record(RELATION_GROUP, body)
