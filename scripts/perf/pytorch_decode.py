#!/usr/bin/env python3
"""The `decode` workload in plain PyTorch eager, for a side-by-side comparison.

An independent decoder-only transformer of the same presets as coload's built-in LLM (GPT-2
small, TinyLlama-1.1B; random weights), written the way a PyTorch user writes one for serving
without an engine: a KV cache preallocated per layer ([B, kv_heads, context, head_dim]),
F.scaled_dot_product_attention, bf16 weights and activations on CUDA, greedy argmax on the device
fed back as the next token.

Same protocol as coload's `decode` worker: a batch of B sequences prefills a fixed random prompt
of P tokens (the first output token), then G - 1 decode steps each generate one more token per
sequence, then the cycle starts again; every iteration (prefill or decode step) ends with a
device synchronize; warmup iterations first, then a timed window. Generated tokens/s counts B per
iteration, both phases, as coload does.

  python3 scripts/perf/pytorch_decode.py --model gpt2-small --batch-size 8 --prompt-tokens 512 \
      --output-tokens 128 --window-s 10

Prints one JSON object: impl, model, batch_size, prompt/output tokens, iterations, tokens_per_s,
tpot_p50_ms / tpot_p99_ms (decode steps), prefill_p50_ms.
"""

import argparse
import json
import math
import time

import torch
import torch.nn.functional as F

PRESETS = {
    # layers, hidden, heads, kv_heads, intermediate, vocab, context, architecture
    "gpt2-small": (12, 768, 12, 12, 3072, 50257, 1024, "gpt2"),
    "tinyllama-1.1b": (22, 2048, 32, 4, 5632, 32000, 2048, "llama"),
}


def percentile(sorted_values, p):
    """Nearest rank: the ceil(p*n)-th smallest, as in coload-analysis."""
    n = len(sorted_values)
    return sorted_values[max(1, math.ceil(p * n)) - 1]


class Decoder(torch.nn.Module):
    def __init__(self, preset, batch, dtype, device):
        super().__init__()
        L, h, H, KV, inter, vocab, ctx, arch = PRESETS[preset]
        self.L, self.h, self.H, self.KV, self.d, self.ctx = L, h, H, KV, h // H, ctx
        self.gpt2 = arch == "gpt2"
        kw = dict(device=device, dtype=dtype)
        std = 0.02
        self.embed = torch.randn(vocab, h, **kw) * std
        self.pos = torch.randn(ctx, h, **kw) * std if self.gpt2 else None
        self.layers = []
        for _ in range(L):
            lw = {
                "n1": torch.ones(h, **kw),
                "n2": torch.ones(h, **kw),
                "qkv": torch.randn(h + 2 * KV * self.d, h, **kw) * std,
                "out": torch.randn(h, h, **kw) * std,
            }
            if self.gpt2:
                lw.update(
                    b1=torch.zeros(h, **kw),
                    b2=torch.zeros(h, **kw),
                    bqkv=torch.zeros(h + 2 * KV * self.d, **kw),
                    bout=torch.zeros(h, **kw),
                    up=torch.randn(inter, h, **kw) * std,
                    bup=torch.zeros(inter, **kw),
                    down=torch.randn(h, inter, **kw) * std,
                    bdown=torch.zeros(h, **kw),
                )
            else:
                lw.update(
                    gate_up=torch.randn(2 * inter, h, **kw) * std,
                    down=torch.randn(h, inter, **kw) * std,
                )
            lw["k"] = torch.zeros(batch, KV, ctx, self.d, **kw)
            lw["v"] = torch.zeros(batch, KV, ctx, self.d, **kw)
            self.layers.append(lw)
        self.nf = torch.ones(h, **kw)
        self.bf = torch.zeros(h, **kw)
        self.head = self.embed if self.gpt2 else torch.randn(vocab, h, **kw) * std
        if not self.gpt2:
            inv = 1.0 / (10000.0 ** (torch.arange(0, self.d, 2, device=device).float() / self.d))
            ang = torch.arange(ctx, device=device).float()[:, None] * inv[None, :]
            self.cos = torch.cat([ang.cos(), ang.cos()], -1).to(dtype)
            self.sin = torch.cat([ang.sin(), ang.sin()], -1).to(dtype)

    def norm(self, x, w, b):
        if self.gpt2:
            return F.layer_norm(x, (self.h,), w, b, 1e-5)
        return F.rms_norm(x, (self.h,), w, 1e-5)

    def rotary(self, x, start, n):
        cos = self.cos[start:start + n]
        sin = self.sin[start:start + n]
        half = self.d // 2
        rot = torch.cat([-x[..., half:], x[..., :half]], -1)
        return x * cos + rot * sin

    @torch.inference_mode()
    def decode_static(self, token, pos, key_positions):
        """One decode step of a fixed shape, as engines capture it in a CUDA graph.

        token [B, 1] and pos [1] (int64, on the device) are static inputs: the step writes each
        layer's new key and value at `pos` with index_copy_, attends over the whole cache under
        the mask `key_position <= pos` (a graph cannot change shape), grouped-query attention
        through SDPA's enable_gqa, then writes the argmax into `token` and advances `pos` in
        place, so that replaying the graph again decodes the next token with no host work.
        """
        B = token.shape[0]
        x = self.embed[token]
        if self.gpt2:
            x = x + self.pos.index_select(0, pos)
        mask = (key_positions <= pos).view(1, 1, 1, self.ctx)
        if not self.gpt2:
            cos = self.cos.index_select(0, pos)
            sin = self.sin.index_select(0, pos)
        half = self.d // 2
        gqa = self.KV != self.H
        for lw in self.layers:
            y = self.norm(x, lw["n1"], lw.get("b1"))
            qkv = F.linear(y, lw["qkv"], lw.get("bqkv"))
            q = qkv[..., : self.h].view(B, 1, self.H, self.d).transpose(1, 2)
            k = qkv[..., self.h: self.h + self.KV * self.d].view(B, 1, self.KV, self.d).transpose(1, 2)
            v = qkv[..., self.h + self.KV * self.d:].view(B, 1, self.KV, self.d).transpose(1, 2)
            if not self.gpt2:
                q = q * cos + torch.cat([-q[..., half:], q[..., :half]], -1) * sin
                k = k * cos + torch.cat([-k[..., half:], k[..., :half]], -1) * sin
            lw["k"].index_copy_(2, pos, k)
            lw["v"].index_copy_(2, pos, v)
            a = F.scaled_dot_product_attention(q, lw["k"], lw["v"], attn_mask=mask, enable_gqa=gqa)
            x = x + F.linear(a.transpose(1, 2).reshape(B, 1, self.h), lw["out"], lw.get("bout"))
            y = self.norm(x, lw["n2"], lw.get("b2"))
            if self.gpt2:
                m = F.gelu(F.linear(y, lw["up"], lw["bup"]), approximate="tanh")
                x = x + F.linear(m, lw["down"], lw["bdown"])
            else:
                gate, up = F.linear(y, lw["gate_up"]).chunk(2, -1)
                x = x + F.linear(F.silu(gate) * up, lw["down"])
        x = self.norm(x[:, -1], self.nf, self.bf if self.gpt2 else None)
        logits = F.linear(x, self.head)
        token.copy_(logits.argmax(-1, keepdim=True))
        pos.add_(1)
        return logits

    @torch.inference_mode()
    def forward(self, tokens, start):
        """tokens [B, n] at positions start..start+n; returns the last position's logits."""
        B, n = tokens.shape
        x = self.embed[tokens]
        if self.gpt2:
            x = x + self.pos[start:start + n]
        for lw in self.layers:
            y = self.norm(x, lw["n1"], lw.get("b1"))
            qkv = F.linear(y, lw["qkv"], lw.get("bqkv"))
            q = qkv[..., : self.h].view(B, n, self.H, self.d).transpose(1, 2)
            k = qkv[..., self.h: self.h + self.KV * self.d].view(B, n, self.KV, self.d).transpose(1, 2)
            v = qkv[..., self.h + self.KV * self.d:].view(B, n, self.KV, self.d).transpose(1, 2)
            if not self.gpt2:
                q, k = self.rotary(q, start, n), self.rotary(k, start, n)
            lw["k"][:, :, start:start + n] = k
            lw["v"][:, :, start:start + n] = v
            keys = lw["k"][:, :, : start + n]
            values = lw["v"][:, :, : start + n]
            gqa = self.KV != self.H
            if n > 1:
                a = F.scaled_dot_product_attention(q, keys, values, is_causal=True, enable_gqa=gqa)
            else:
                a = F.scaled_dot_product_attention(q, keys, values, enable_gqa=gqa)
            x = x + F.linear(a.transpose(1, 2).reshape(B, n, self.h), lw["out"], lw.get("bout"))
            y = self.norm(x, lw["n2"], lw.get("b2"))
            if self.gpt2:
                m = F.gelu(F.linear(y, lw["up"], lw["bup"]), approximate="tanh")
                x = x + F.linear(m, lw["down"], lw["bdown"])
            else:
                gate, up = F.linear(y, lw["gate_up"]).chunk(2, -1)
                x = x + F.linear(F.silu(gate) * up, lw["down"])
        x = self.norm(x[:, -1], self.nf, self.bf if self.gpt2 else None)
        return F.linear(x, self.head)


def graph_iterations(model, prompt, args, sync):
    """The protocol's iterations with every decode step one replay of a graph captured once
    (the prefill stays eager, as coload's --execution cuda-graph runs it)."""
    B, P = prompt.shape
    device = prompt.device
    token = torch.zeros(B, 1, dtype=torch.long, device=device)
    pos = torch.zeros(1, dtype=torch.long, device=device)
    key_positions = torch.arange(model.ctx, device=device)
    # Warm up on a side stream (kernel selection, workspaces), then capture, as PyTorch's CUDA
    # graph documentation does; the cache rows written here are overwritten by every prefill.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            pos.fill_(P)
            model.decode_static(token, pos, key_positions)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    pos.fill_(P)
    with torch.cuda.graph(graph):
        model.decode_static(token, pos, key_positions)
    G = args.output_tokens
    state = {"i": 0}

    def iteration():
        i = state["i"] % G
        if i == 0:
            logits = model(prompt, 0)
            token.copy_(logits.argmax(-1, keepdim=True))
            pos.fill_(P)
            phase = "prefill"
        else:
            graph.replay()
            phase = "decode"
        sync()
        state["i"] += 1
        return phase

    def restart():
        state["i"] = 0

    iteration.restart = restart
    return iteration


def profile_decode(iteration, steps, output_tokens):
    """Where a decode step's time goes on the device: `steps` decode iterations (none a prefill)
    under torch.profiler; kernels per step, device time per step, and the ten kernels that take
    the most device time (name, calls per step, microseconds per step)."""
    from torch.profiler import ProfilerActivity, profile

    done = 0
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        while done < steps:
            if iteration() == "decode":
                done += 1
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    by_name = {}
    for e in kernels:
        calls, us = by_name.get(e.name, (0, 0.0))
        by_name[e.name] = (calls + 1, us + e.device_time)
    top = sorted(by_name.items(), key=lambda kv: -kv[1][1])[:10]
    # Iterations also ran prefills between the decode steps at a cycle's end: at most one per
    # `output_tokens`, counted in the totals; the note in the output says so.
    return {
        "decode_steps": steps,
        "device_events_per_step": len(kernels) / steps,
        "device_us_per_step": sum(e.device_time for e in kernels) / steps,
        "top": [{"name": n[:90], "calls_per_step": c / steps, "us_per_step": us / steps}
                for n, (c, us) in top],
        "note": f"totals include any prefill run among the steps (one per {output_tokens} iterations)",
    }


def gpu_uuid():
    """The card's UUID (GPU-...), as nvidia-smi and coload's worker.json name it."""
    try:
        return "GPU-" + str(torch.cuda.get_device_properties(0).uuid)
    except (AttributeError, RuntimeError):
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--impl", choices=["eager", "graph"], default="eager",
                    help="eager, or graph: every decode step one replay of a CUDA graph captured once")
    ap.add_argument("--model", choices=sorted(PRESETS), default="gpt2-small")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--output-tokens", type=int, default=128)
    # Every decode step of a cycle attends over a new KV length, and a fresh process pays a
    # one-time cost per new attention shape: on the H200 (torch 2.11, bf16) the first cycle's
    # steps took 60-80 ms against 3.6 ms later, which a 20-iteration warmup left inside the
    # window. The default warmup covers two whole cycles (every shape, twice).
    ap.add_argument("--warmup-iterations", type=int, default=None,
                    help="iterations before the window (default: two cycles, 2 x --output-tokens)")
    ap.add_argument("--window-s", type=float, default=10.0)
    ap.add_argument("--profile-steps", type=int, default=0,
                    help="after warmup, profile this many decode steps (torch.profiler) into the JSON")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cuda", help="cuda (the comparison) or cpu (a smoke test)")
    args = ap.parse_args()
    if args.warmup_iterations is None:
        args.warmup_iterations = 2 * args.output_tokens
    if args.batch_size < 1 or args.prompt_tokens < 1 or args.output_tokens < 1:
        ap.error("--batch-size, --prompt-tokens and --output-tokens must be at least 1")
    ctx = PRESETS[args.model][6]
    if args.prompt_tokens + args.output_tokens - 1 > ctx:
        ap.error(f"prompt + output - 1 must fit the context ({ctx})")
    device = torch.device(args.device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    torch.manual_seed(args.seed)
    model = Decoder(args.model, args.batch_size, torch.bfloat16, device)
    vocab = PRESETS[args.model][5]
    prompt = torch.randint(0, vocab, (args.batch_size, args.prompt_tokens), device=device)
    G = args.output_tokens
    state = {"i": 0, "next": None}

    def iteration():
        """One prefill or decode step; returns its phase."""
        i = state["i"] % G
        if i == 0:
            logits = model(prompt, 0)
            phase = "prefill"
        else:
            logits = model(state["next"], args.prompt_tokens + i - 1)
            phase = "decode"
        state["next"] = logits.argmax(-1, keepdim=True)
        sync()
        state["i"] += 1
        return phase

    if args.impl == "graph":
        if device.type != "cuda":
            ap.error("--impl graph needs CUDA")
        iteration = graph_iterations(model, prompt, args, sync)

    for _ in range(args.warmup_iterations):
        iteration()
    profile = None
    if args.profile_steps:
        profile = profile_decode(iteration, args.profile_steps, args.output_tokens)
    # The window starts at a prefill, as coload's restart() does.
    state["i"] = 0
    if hasattr(iteration, "restart"):
        iteration.restart()
    times = {"prefill": [], "decode": []}
    start = time.perf_counter()
    end_at = start + args.window_s
    iterations = 0
    while True:
        t0 = time.perf_counter()
        if t0 >= end_at:
            break
        phase = iteration()
        times[phase].append(time.perf_counter() - t0)
        iterations += 1
    elapsed = time.perf_counter() - start
    dec = sorted(times["decode"])
    pre = sorted(times["prefill"])
    print(json.dumps({
        "impl": f"pytorch-{args.impl}",
        "gpu": torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu",
        "gpu_uuid": gpu_uuid() if device.type == "cuda" else None,
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "torch": torch.__version__,
        "model": args.model,
        "batch_size": args.batch_size,
        "prompt_tokens": args.prompt_tokens,
        "output_tokens": args.output_tokens,
        "iterations": iterations,
        "warmup_iterations": args.warmup_iterations,
        "window_s": elapsed,
        "tokens_per_s": iterations * args.batch_size / elapsed,
        "tpot_p50_ms": percentile(dec, 0.5) * 1e3 if dec else None,
        "tpot_p99_ms": percentile(dec, 0.99) * 1e3 if dec else None,
        "prefill_p50_ms": percentile(pre, 0.5) * 1e3 if pre else None,
        **({"profile": profile} if profile else {}),
    }))


if __name__ == "__main__":
    main()
