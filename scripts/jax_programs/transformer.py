"""A jit-compiled training step of a small transformer (4 pre-norm blocks, width 1024, 16 heads, sequence 512,
batch 8, float32, SGD), three steps with ``block_until_ready`` after each: a program whose buffers XLA may
rematerialize under a tight limit (the MLP's do not change). Ends as ``result.run`` says."""

import sys

import jax
import jax.numpy as jnp
import result

BLOCKS, WIDTH, HEADS, SEQ, BATCH, STEPS = 4, 1024, 16, 512, 8, 3


def norm(x):
    return (x - x.mean(-1, keepdims=True)) * jax.lax.rsqrt(x.var(-1, keepdims=True) + 1e-5)


def block(p, x):
    b, s, d = x.shape
    h = norm(x)
    q, k, v = (jnp.reshape(h @ p[n], (b, s, HEADS, d // HEADS)) for n in ("q", "k", "v"))
    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(d // HEADS)
    scores = jnp.where(jnp.tril(jnp.ones((s, s), bool)), scores, -1e9)
    att = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(scores, -1), v).reshape(b, s, d)
    x = x + att @ p["o"]
    return x + jax.nn.gelu(norm(x) @ p["up"]) @ p["down"]


def loss(params, x, y):
    for p in params:
        x = block(p, x)
    return jnp.mean((x - y) ** 2)


@jax.jit
def step(params, x, y):
    grads = jax.grad(loss)(params, x, y)
    return jax.tree_util.tree_map(lambda w, g: w - 0.01 * g, params, grads)


def train() -> None:
    key = jax.random.PRNGKey(0)
    shapes = {"q": (WIDTH, WIDTH), "k": (WIDTH, WIDTH), "v": (WIDTH, WIDTH), "o": (WIDTH, WIDTH),
              "up": (WIDTH, 4 * WIDTH), "down": (4 * WIDTH, WIDTH)}
    params = []
    for _ in range(BLOCKS):
        layer = {}
        for name, shape in shapes.items():
            key, sub = jax.random.split(key)
            layer[name] = jax.random.normal(sub, shape, jnp.float32) * 0.02
        params.append(layer)
    key, kx, ky = jax.random.split(key, 3)
    x = jax.random.normal(kx, (BATCH, SEQ, WIDTH), jnp.float32)
    y = jax.random.normal(ky, (BATCH, SEQ, WIDTH), jnp.float32)
    for _ in range(STEPS):
        params = step(params, x, y)
        jax.block_until_ready(params)


if __name__ == "__main__":
    sys.exit(result.run("transformer", train))
