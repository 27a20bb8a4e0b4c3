"""Checks a ksweep_bench JSON (argv[1]) for the memory counters of every benchmark that measures
memory: `device_peak_bytes` (the peak of Kokkos' allocations in the backend's memory space) is
there and positive, and a gradient's holds at least its saved steps (`boundary_bytes`). Exit 1
with the benchmark named otherwise."""
import json
import sys

rows = [b for b in json.load(open(sys.argv[1]))["benchmarks"] if "rss_increase_bytes" in b or "baseline_rss_bytes" in b]
bad = []
for b in rows:
    peak = b.get("device_peak_bytes")
    if not peak or peak <= 0:
        bad.append("%s: device_peak_bytes = %r" % (b["name"], peak))
    elif peak < b.get("boundary_bytes", 0):
        bad.append("%s: device_peak_bytes %.0f < boundary_bytes %.0f" % (b["name"], peak, b["boundary_bytes"]))
print("%d benchmarks measure memory; %d without a plausible device_peak_bytes" % (len(rows), len(bad)))
for line in bad:
    print("  " + line)
sys.exit(1 if bad or not rows else 0)
