"""A jit-compiled training step of a 6-layer MLP (4096x4096 float32 weights, batch 2048, tanh, mean squared error,
SGD), run three times with ``block_until_ready`` after each step, weights made with ``jax.random.normal`` before the
first step: the program of ``fixtures/gpu-h200`` (written again from its README; not the same source). Prints one
``RESULT {json}`` line with the outcome and the allocator's own counters (``memory_stats()``); exit 3 when XLA runs
out of memory. Run it under ``memtrace run`` (``scripts/record_jax_ladder.py``)."""

import json
import sys

import jax
import jax.numpy as jnp

LAYERS, WIDTH, BATCH, STEPS = 6, 4096, 2048, 3


def loss(weights, x, y):
    for w in weights:
        x = jnp.tanh(x @ w)
    return jnp.mean((x - y) ** 2)


@jax.jit
def step(weights, x, y):
    grads = jax.grad(loss)(weights, x, y)
    return [w - 0.01 * g for w, g in zip(weights, grads)]


def main() -> int:
    status, error = "ok", ""
    try:
        keys = jax.random.split(jax.random.PRNGKey(0), LAYERS + 2)
        weights = [jax.random.normal(k, (WIDTH, WIDTH), jnp.float32) * 0.01 for k in keys[:LAYERS]]
        x = jax.random.normal(keys[-2], (BATCH, WIDTH), jnp.float32)
        y = jax.random.normal(keys[-1], (BATCH, WIDTH), jnp.float32)
        for _ in range(STEPS):
            weights = step(weights, x, y)
            jax.block_until_ready(weights)
    except Exception as exc:  # noqa: BLE001 - XLA's RESOURCE_EXHAUSTED, or any other failure: said in RESULT
        status, error = ("oom" if "RESOURCE_EXHAUSTED" in str(exc) else "error"), str(exc).splitlines()[0][:300]
    stats = jax.devices()[0].memory_stats() or {}
    print("RESULT " + json.dumps({"prog": "mlp", "status": status, "error": error, "stats": stats}), flush=True)
    return {"ok": 0, "oom": 3}.get(status, 1)


if __name__ == "__main__":
    sys.exit(main())
