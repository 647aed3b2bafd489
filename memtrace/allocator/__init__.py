"""The BFC allocator stage: a model of TensorFlow's and XLA's BFC allocator and every answer drawn from it.

``bfc`` is the model itself, a mechanism that imports nothing of memtrace: requests and options in,
what the allocator does out. Around it: ``requests`` (a trace's events as the request sequence the
allocator saw), ``defaults`` (the options and limits each runtime and card gives an allocator),
``fit`` (the smallest limit, the first failure, what each option would need), ``reproduce`` (the
self-check against a profile's own addresses), ``batch_size`` (the largest batch, from two
recordings) and ``batch_band`` (what two recordings do not know: the band over a batch's plausible
runs), ``regions`` and ``address_space`` (the allocator's map over time), ``dump`` (what an
out-of-memory dump holds), ``oom`` (its verdict) and ``oom_fit`` (what would have avoided it). Every
allocator rule (rounding, bins, splitting, regions) lives in ``bfc`` and nowhere else.
"""
