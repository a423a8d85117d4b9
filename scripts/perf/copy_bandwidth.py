#!/usr/bin/env python3
"""The card's measured device-memory bandwidth: the denominator of the decode floor.

A device-to-device copy of a 4 GiB buffer (far larger than the L2 cache), repeated 20 times
after 3 untimed copies, timed with CUDA events; each copy reads and writes the buffer once, so
bytes moved = 2 x size. Prints one JSON object: gpu, gpu_uuid, date_utc, torch, bytes_per_copy,
copies, seconds, bandwidth_bytes_per_s (the median copy's), and every copy's time.

  python3 scripts/perf/copy_bandwidth.py > bandwidth.json
"""

import json
import sys
import time

import torch

SIZE_BYTES = 4 << 30
COPIES = 20


def main():
    if not torch.cuda.is_available():
        sys.exit("error: CUDA is not available; the bandwidth is a GPU's")
    src = torch.empty(SIZE_BYTES, dtype=torch.uint8, device="cuda")
    src.fill_(1)
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    torch.cuda.synchronize()
    times = []
    for _ in range(COPIES):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    median = sorted(times)[len(times) // 2]
    props = torch.cuda.get_device_properties(0)
    print(json.dumps({
        "gpu": torch.cuda.get_device_name(0),
        "gpu_uuid": "GPU-" + str(getattr(props, "uuid", "")),
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "torch": torch.__version__,
        "bytes_per_copy": 2 * SIZE_BYTES,
        "copies": COPIES,
        "copy_s": times,
        "bandwidth_bytes_per_s": 2 * SIZE_BYTES / median,
    }))


if __name__ == "__main__":
    main()
