"""The smallest JAX program: one 1 MiB array on the GPU; ``result.run``'s line gives the pool XLA made
(``bytes_limit``) for the limit it was given."""

import sys

import jax.numpy as jnp
import result


def allocate() -> None:
    jnp.ones((1 << 18,), jnp.float32).block_until_ready()


if __name__ == "__main__":
    sys.exit(result.run("pool", allocate))
