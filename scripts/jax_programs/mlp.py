"""A jit-compiled training step of a 6-layer MLP (4096x4096 float32 weights, batch 2048, tanh, mean squared error,
SGD), run three times with ``block_until_ready`` after each step, weights made with ``jax.random.normal`` before the
first step: the program of ``fixtures/gpu-h200`` (written again from its README; not the same source). Ends as
``result.run`` says; run it under ``memtrace run`` (``scripts/record_jax_ladder.py``)."""

import sys

import jax
import jax.numpy as jnp
import result

LAYERS, WIDTH, BATCH, STEPS = 6, 4096, 2048, 3


def loss(weights, x, y):
    for w in weights:
        x = jnp.tanh(x @ w)
    return jnp.mean((x - y) ** 2)


@jax.jit
def step(weights, x, y):
    grads = jax.grad(loss)(weights, x, y)
    return [w - 0.01 * g for w, g in zip(weights, grads)]


def train() -> None:
    keys = jax.random.split(jax.random.PRNGKey(0), LAYERS + 2)
    weights = [jax.random.normal(k, (WIDTH, WIDTH), jnp.float32) * 0.01 for k in keys[:LAYERS]]
    x = jax.random.normal(keys[-2], (BATCH, WIDTH), jnp.float32)
    y = jax.random.normal(keys[-1], (BATCH, WIDTH), jnp.float32)
    for _ in range(STEPS):
        weights = step(weights, x, y)
        jax.block_until_ready(weights)


if __name__ == "__main__":
    sys.exit(result.run("mlp", train))
