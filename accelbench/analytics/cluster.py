"""A cluster (device, nodes, links) for the planner; no torch.

A job's layout on it is accelbench.config.layout.Layout. Link figures are per device and per
direction, in GB/s (10^9 bytes). Defaults per system come from the device table where it has a
scale-up figure, and from the usual node designs otherwise (tagged in `LINK_SOURCES`);
everything can be overridden on the command line.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace

from accelbench.analytics.machine_profile import MachineProfile
from accelbench.config.errors import ConfigError, require_positive
from accelbench.config.vocab import GB, GIB
from accelbench.hardware.specs import DeviceSpec, get_spec

# A device variant: KEY:field=value,... next to the datasheet rows (docs/planner.md).
VARIANT_FIELDS = {"memory_gb": "memory in GB", "bw_gb_s": "memory bandwidth in GB/s",
                  "peak_scale": "factor on every peak (power cap, lower clocks)"}

# (devices per node, intra GB/s, intra latency s, inter GB/s, inter latency s)
_LINK_DEFAULTS: dict[str, tuple[int, float, float, float, float]] = {
    "a100-40gb": (8, 300.0, 5e-6, 25.0, 10e-6),
    "a100-80gb": (8, 300.0, 5e-6, 25.0, 10e-6),
    "h100-sxm": (8, 450.0, 5e-6, 50.0, 10e-6),
    "h100-pcie": (8, 64.0, 10e-6, 25.0, 10e-6),
    "h200": (8, 450.0, 5e-6, 50.0, 10e-6),
    "b200": (8, 900.0, 5e-6, 50.0, 10e-6),
    # 4 modules (8 GCDs) a node; torch, and so a training job, has one rank per GCD
    "mi250": (4, 50.0, 10e-6, 25.0, 10e-6),
    "mi250x": (4, 50.0, 10e-6, 25.0, 10e-6),
    "mi250-gcd": (8, 50.0, 10e-6, 25.0, 10e-6),
    "mi250x-gcd": (8, 50.0, 10e-6, 25.0, 10e-6),
    "mi300x": (8, 448.0, 10e-6, 50.0, 10e-6),
    "gaudi2": (8, 150.0, 10e-6, 37.5, 10e-6),
    "gaudi3": (8, 300.0, 10e-6, 75.0, 10e-6),
    "tpu-v4": (3072, 100.0, 10e-6, 3.3, 50e-6),
    "tpu-v5e": (256, 100.0, 10e-6, 3.3, 50e-6),
    "tpu-v5p": (8960, 200.0, 10e-6, 6.25, 50e-6),
}
_GENERIC_LINKS = (8, 100.0, 10e-6, 25.0, 10e-6)
LINK_SOURCES = {
    "nvidia": "intra: device table NVLink figure; inter: one 200 Gb/s (A100) or 400 Gb/s "
              "(H100/H200/B200) NIC per GPU, as in DGX/HGX nodes",
    "amd": "intra: device table (MI300X) or an assumed 50 GB/s (MI250/MI250X); inter: one NIC "
           "per device assumed",
    "intel": "intra: device table (RoCE ports inside the node); inter: 3 of 24 ports per card",
    "google": "a 'node' is one ICI domain (pod or slice); ICI and DCN figures are assumptions, "
              "not verified datasheet values",
    "generic": "no default for this device: assumed 100 GB/s intra, 25 GB/s inter",
}
# Achieved over nominal link bandwidth for large collectives (NCCL bus bandwidth is typically
# 75-90% of the nominal link rate); an assumption, stated in docs/planner.md.
DEFAULT_LINK_EFFICIENCY = 0.8


@dataclass(frozen=True)
class ClusterSpec:
    """Devices and links; a collective inside a node uses the intra link, else the inter one."""

    device: DeviceSpec
    devices_per_node: int
    nodes: int
    intra_gb_per_s: float
    intra_latency_s: float
    inter_gb_per_s: float
    inter_latency_s: float
    link_efficiency: float = DEFAULT_LINK_EFFICIENCY
    # a measured machine profile (accelbench calibrate): its curves time compute and, inside a
    # node, collectives (analytics/steptime.py); None: the built-in curves and the links above
    profile: MachineProfile | None = field(default=None, compare=False)

    @property
    def n_devices(self) -> int:
        """All devices in the cluster."""
        return self.devices_per_node * self.nodes

    @property
    def memory_bytes_per_device(self) -> float:
        """Device memory in bytes. An accelerator's memory "GB" is binary (HBM stacks come in
        GiB: an "A100 80GB" shows 81,920 MiB in nvidia-smi, an "H100 80GB" 81,559 MiB), so
        memory_gb counts GiB here; links and bandwidths stay in 10^9-byte GB."""
        return (self.device.memory_gb or 0.0) * GIB

    def link(self, span: int) -> tuple[float, float]:
        """Effective bytes/s and latency for a group whose ranks span `span` consecutive devices."""
        if span <= self.devices_per_node:
            return self.intra_gb_per_s * GB * self.link_efficiency, self.intra_latency_s
        return self.inter_gb_per_s * GB * self.link_efficiency, self.inter_latency_s

    def to_dict(self) -> dict[str, object]:
        """Plain dict for JSON output."""
        out = asdict(replace(self, profile=None))
        out["device"] = self.device.key
        out["profile"] = self.profile.source if self.profile is not None else None
        out["device_source"] = self.device.source
        return out


def _variant_values(text: str, base: str) -> dict[str, float]:
    """'memory_gb=96,peak_scale=0.8' -> {'memory_gb': 96.0, 'peak_scale': 0.8}, each checked."""
    allowed = ", ".join(f"{k}=<{v}>" for k, v in VARIANT_FIELDS.items())
    values: dict[str, float] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, eq, raw = (x.strip() for x in item.partition("="))
        if not eq or key not in VARIANT_FIELDS or key in values:
            raise ConfigError("device", f"bad variant item {item!r} of {base!r} (each field "
                              "once)", allowed)
        try:
            values[key] = float(raw)
        except ValueError:
            raise ConfigError("device", f"{key} must be a number, got {raw!r}", allowed) from None
        if not math.isfinite(values[key]) or values[key] <= 0:
            raise ConfigError("device", f"{key} must be a positive number, got {raw!r}", allowed)
    if not values:
        raise ConfigError("device", f"a variant of {base!r} names no field", allowed)
    return values


def device_variant(text: str) -> DeviceSpec:
    """A datasheet row ('h100-sxm'), or a variant of one ('h100-sxm:memory_gb=96,bw_gb_s=2400,
    peak_scale=0.8'): the row with those fields changed, keyed and named as derived from it."""
    base, colon, rest = text.partition(":")
    spec = get_spec(base.strip())
    if not colon:
        return spec
    values = _variant_values(rest, spec.key)
    label = ",".join(f"{k}={values[k]:g}" for k in VARIANT_FIELDS if k in values)
    scale = values.get("peak_scale", 1.0)
    return replace(spec, key=f"{spec.key}:{label}", name=f"{spec.name}, variant {label}",
                   peak_tflops={k: v * scale for k, v in spec.peak_tflops.items()},
                   memory_gb=values.get("memory_gb", spec.memory_gb),
                   memory_bw_gb_per_s=values.get("bw_gb_s", spec.memory_bw_gb_per_s),
                   source=f"derived from the {spec.key} datasheet row ({spec.source}) with "
                          f"{label}", aliases=())


def base_key(spec: DeviceSpec) -> str:
    """The datasheet row a device (or a variant of one) comes from."""
    return spec.key.partition(":")[0]


def make_cluster(device: str | DeviceSpec, nodes: int, devices_per_node: int | None = None,
                 intra_gb_per_s: float | None = None, inter_gb_per_s: float | None = None,
                 intra_latency_s: float | None = None,
                 inter_latency_s: float | None = None) -> ClusterSpec:
    """A cluster from a device key or variant (device_variant), filling each unset link figure
    from the defaults of the datasheet row it comes from."""
    spec = device if isinstance(device, DeviceSpec) else device_variant(device)
    gpn, intra, intra_lat, inter, inter_lat = _LINK_DEFAULTS.get(base_key(spec), _GENERIC_LINKS)
    cluster = ClusterSpec(
        spec, gpn if devices_per_node is None else devices_per_node, nodes,
        intra if intra_gb_per_s is None else intra_gb_per_s,
        intra_lat if intra_latency_s is None else intra_latency_s,
        inter if inter_gb_per_s is None else inter_gb_per_s,
        inter_lat if inter_latency_s is None else inter_latency_s)
    for name in ("devices_per_node", "nodes", "intra_gb_per_s", "inter_gb_per_s"):
        require_positive(f"cluster.{name}", getattr(cluster, name))
    for name in ("intra_latency_s", "inter_latency_s"):
        if getattr(cluster, name) < 0:
            raise ConfigError(f"cluster.{name}", f"must not be negative, got "
                              f"{getattr(cluster, name)!r}", ">= 0")
    if not spec.memory_gb:
        raise ConfigError("device", f"{spec.key} has no memory size in the device table",
                          "a device with memory_gb")
    return cluster


def link_source(spec: DeviceSpec) -> str:
    """Where the default link figures for this device come from."""
    if base_key(spec) not in _LINK_DEFAULTS:
        return LINK_SOURCES["generic"]
    return LINK_SOURCES.get(spec.vendor, LINK_SOURCES["generic"])
