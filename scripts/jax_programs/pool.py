"""The smallest JAX program: one 1 MiB array on the GPU. Prints ``RESULT {json}`` with the allocator's own counters
(``memory_stats()``), whose ``bytes_limit`` is the pool XLA made for the limit it was given."""

import json

import jax
import jax.numpy as jnp

x = jnp.ones((1 << 18,), jnp.float32).block_until_ready()
print("RESULT " + json.dumps({"prog": "pool", "status": "ok", "error": "", "stats": jax.devices()[0].memory_stats()}),
      flush=True)
