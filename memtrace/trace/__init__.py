"""The trace: one step's data as numpy tables, and what every analysis derives from it once.

``data`` is the columnar model a reader builds (:class:`~memtrace.trace.data.TraceData`); ``buffers``
works out each buffer's identity, readers and lifetime; ``replay`` turns an allocator's records into
live bytes over time and reconciles them with its snapshots; ``devices`` maps a device (``CPU:0``)
to the allocator its memory went through; ``layers`` names Keras layers and phases from node names.
Nothing here imports a reader, the allocator model or an analysis.
"""
