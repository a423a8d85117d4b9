#!/usr/bin/env python3
"""The same step as bench-worker, in PyTorch from Python, for a side-by-side comparison.

  --impl eager   PyTorch's own eager loop (what a user would write in Python)
  --impl graph   the same step captured once in a CUDA graph and replayed: no kernel-launch or
                 Python overhead per batch, the floor any host-side implementation can approach

  --precision bf16 --memory-format channels-last   how PyTorch users train and infer on Hopper:
                 bf16 autocast, the model and the batch in NHWC (coload's flags of the same names)

Same protocol as bench-worker: the torchvision model of --model (resnet18 by default; the
architectures bench-worker's built-in models follow, 1000 classes), resident synthetic inputs and labels,
SGD (lr 0.01, momentum 0.9) with cross-entropy for train, eval-mode forward under
torch.inference_mode for infer, cuDNN benchmark on, a device synchronize ending every batch,
warmup batches first, then a timed window. Several processes can share one start instant with
--start-at (unix seconds), which is how the time-sliced cohort of Python workers is run.

Prints one JSON object: impl, model, workload, batches, window_s, samples_per_s, p50_ms, p99_ms, ...
"""

import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F
import torchvision


def percentile(sorted_values, p):
    """Nearest rank: the ceil(p*n)-th smallest, as in coload-analysis."""
    n = len(sorted_values)
    rank = max(1, math.ceil(p * n))
    return sorted_values[rank - 1]


def build(args, device):
    torch.manual_seed(args.seed)
    model = getattr(torchvision.models, args.model)(num_classes=1000).to(device)
    x = torch.randn(args.batch_size, 3, args.image_size, args.image_size, device=device)
    y = torch.randint(0, 1000, (args.batch_size,), device=device)
    if args.memory_format == "channels-last":
        # As PyTorch's channels-last tutorial does: the model before its optimizer, and the batch.
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    return model, x, y


def autocast(args):
    """bf16 autocast around the forward (and the loss), as PyTorch's AMP recipe and coload's
    --precision bf16 run it; a disabled context for fp32."""
    return torch.autocast("cuda", dtype=torch.bfloat16, enabled=args.precision == "bf16")


def eager_step(args, model, x, y):
    if args.workload == "train":
        model.train()
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

        def step():
            opt.zero_grad(set_to_none=True)
            with autocast(args):
                loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            torch.cuda.synchronize()

    else:
        model.eval()

        def step():
            with torch.inference_mode(), autocast(args):
                model(x)
            torch.cuda.synchronize()

    return step


def graph_step(args, model, x, y):
    """Whole-step capture as in the PyTorch CUDA graphs documentation."""
    if args.workload == "train":
        model.train()
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                opt.zero_grad(set_to_none=True)
                with autocast(args):
                    loss = F.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(graph):
            # cache_enabled=False: autocast's weight-cast cache must not outlive the capture
            # (PyTorch's CUDA graph documentation for AMP).
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=args.precision == "bf16",
                                cache_enabled=False):
                loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
    else:
        model.eval()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side), torch.inference_mode(), autocast(args):
            for _ in range(3):
                model(x)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.inference_mode(), torch.cuda.graph(graph), torch.autocast(
            "cuda", dtype=torch.bfloat16, enabled=args.precision == "bf16", cache_enabled=False
        ):
            model(x)

    def step():
        graph.replay()
        torch.cuda.synchronize()

    return step


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--impl", choices=["eager", "graph"], required=True)
    ap.add_argument("--workload", choices=["train", "infer"], required=True)
    ap.add_argument("--model", default="resnet18", help="a torchvision.models name (resnet18, resnet50, mobilenet_v2, ...)")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--warmup-batches", type=int, default=20)
    ap.add_argument("--window-s", type=float, default=45.0)
    ap.add_argument("--start-at", type=float, default=None, help="unix seconds to start the window at")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                    help="bf16: autocast around the forward and the loss (coload's --precision bf16)")
    ap.add_argument("--memory-format", choices=["contiguous", "channels-last"], default="contiguous",
                    help="channels-last: the model and the batch in NHWC (coload's --memory-format)")
    ap.add_argument("--label", default="")
    args = ap.parse_args()

    if not torch.cuda.is_available():
        sys.exit("error: CUDA is not available; this comparison needs a GPU")
    device = torch.device("cuda:0")
    torch.backends.cudnn.benchmark = True
    model, x, y = build(args, device)
    make = eager_step if args.impl == "eager" else graph_step
    step = make(args, model, x, y)
    for _ in range(args.warmup_batches):
        step()

    if args.start_at is not None:
        delay = args.start_at - time.time()
        if delay > 0:
            time.sleep(delay)
    durations = []
    start = time.perf_counter()
    deadline = start + args.window_s
    while True:
        t0 = time.perf_counter()
        if t0 >= deadline:
            break
        step()
        t1 = time.perf_counter()
        if t1 > deadline:
            break
        durations.append(t1 - t0)
    durations.sort()
    n = len(durations)
    result = {
        "impl": f"pytorch-{args.impl}",
        "model": args.model,
        "label": args.label,
        "workload": args.workload,
        "batch_size": args.batch_size,
        "image_size": args.image_size,
        "precision": args.precision,
        "memory_format": args.memory_format,
        "window_s": args.window_s,
        "batches": n,
        "samples_per_s": n * args.batch_size / args.window_s,
        "p50_ms": percentile(durations, 0.50) * 1e3 if n else None,
        "p99_ms": percentile(durations, 0.99) * 1e3 if n else None,
        "mean_ms": sum(durations) / n * 1e3 if n else None,
        "torch": torch.__version__,
        "cudnn": torch.backends.cudnn.version(),
        "gpu": torch.cuda.get_device_name(0),
        "gpu_uuid": "GPU-" + str(getattr(torch.cuda.get_device_properties(0), "uuid", "")),
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "pid": os.getpid(),
    }
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
