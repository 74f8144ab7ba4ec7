"""How `accelbench site` scales: N synthetic bundles of 50 records each (made from the committed
H200 records, on several device classes and counts, throughputs varied), then the site built
from them, timed at several N; prints the seconds, the seconds per bundle (flat when the build
grows linearly), the pages and the largest page. docs/exchange.md records a run.

    .venv/bin/python benchmarks/site_scale.py [--sizes 100,300,1000] [--workdir DIR]

Wall time on a shared machine follows its load; CPU time (this process and the processes that
read the bundles, on every core) is printed beside it.
The synthetic records are real records with new uids, hosts, device names and scaled times:
every one passes the same checks as a real bundle (store/validate.py).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import tempfile
import time
import uuid
from pathlib import Path

from accelbench.report.bundle import bundle_body, write_bundle
from accelbench.report.site import build_site

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = ROOT / "docs" / "gpu-runs" / "2026-11-27-h200-2" / "results.db"
DEVICES = ("NVIDIA H100 80GB HBM3", "NVIDIA H200", "NVIDIA A100-SXM4-80GB", "AMD Instinct MI250X")
RECORDS = 50
SEQ_LENS = (256, 512, 1024, 2048, 4096)


def templates() -> list[dict]:
    """The committed run's ok train and block records, decoded."""
    with sqlite3.connect(TEMPLATES) as conn:
        rows = conn.execute("SELECT record_json FROM results WHERE status = 'ok' AND kind IN "
                            "('train', 'block') ORDER BY id").fetchall()
    return [json.loads(text) for text, in rows]


def _scaled(value: object, factor: float) -> object:
    """A time scaled by factor (a list of times each), anything else unchanged."""
    if isinstance(value, float):
        return value * factor
    if isinstance(value, list):
        return [_scaled(v, factor) for v in value]
    return value


def synthetic(template: dict, machine: dict, n: int, rng: random.Random) -> str:
    """One record: the template on another machine, another sequence length, slower or
    faster by a random factor (times scaled, throughputs inverse), new uid."""
    r = json.loads(json.dumps(template))
    factor = rng.uniform(0.5, 2.0)
    r["environment"] |= machine
    r["spec"]["seq_len"] = SEQ_LENS[n % len(SEQ_LENS)]
    r["spec"].pop("workload_id", None)
    r["spec"].pop("fingerprint", None)
    for key, value in r["metrics"].items():
        if "time_s" in key:
            r["metrics"][key] = _scaled(value, factor)
        elif "per_s" in key or key.endswith("mfu") or key.endswith("hfu") or "tflops" in key:
            r["metrics"][key] = _scaled(value, 1 / factor)
    values = r["raw"].get("trial_values") or {}
    for key, value in values.items():
        values[key] = _scaled(value, factor if "time" in key else 1 / factor)
    r["uid"], r["run_id"] = uuid.uuid4().hex, uuid.uuid4().hex[:12]
    return json.dumps(r, sort_keys=True)


def make_bundles(folder: Path, count: int, seed: int = 0) -> list[Path]:
    """`count` gzip bundles of RECORDS records each."""
    rng = random.Random(seed)
    base = templates()
    paths = []
    for i in range(count):
        machine = {"device_name": DEVICES[i % len(DEVICES)], "host": f"node{i:05d}",
                   "device_count": (1, 4, 8)[i % 3]}
        texts = [synthetic(base[n % len(base)], machine, n, rng) for n in range(RECORDS)]
        path = folder / f"bundle{i:05d}.json.gz"
        write_bundle(path, bundle_body(texts))
        paths.append(path)
    return paths


def _cpu_s() -> float:
    """CPU seconds of this process and its finished children (the bundle readers)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,300,1000")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    work = args.workdir or Path(tempfile.mkdtemp(prefix="site-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    paths = sorted(work.glob("bundle*.json.gz"))  # made before: --workdir again reuses them
    if len(paths) < max(sizes):
        paths = make_bundles(work, max(sizes))
        print(f"made {len(paths)} bundles in {time.perf_counter() - start:.1f} s under {work}")
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start")
    print("bundles  wall s  CPU s  CPU s/bundle  pages  largest page (bytes)")
    for n in sizes:
        start, cpu = time.perf_counter(), _cpu_s()
        built = build_site(paths[:n], work / f"site{n}")
        took, used = time.perf_counter() - start, _cpu_s() - cpu
        print(f"{n:7d}  {took:6.1f}  {used:5.1f}  {used / n:12.4f}  {built.pages:5d}  "
              f"{built.largest_bytes:,}  (load average {os.getloadavg()[0]:.1f})", flush=True)


if __name__ == "__main__":
    main()
