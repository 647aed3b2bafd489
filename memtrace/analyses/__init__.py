"""The analyses: pure functions of a trace and their options, each returning a small result object.

One module per question, named as the command that asks it: ``summary``, ``peak``, ``timeline``,
``ops``, ``frag``, ``tensor``, ``graph`` (the dataflow graph), ``check`` (memory budgets), ``diff``,
``export`` (Trace Event Format) and ``report`` (what the HTML page shows). They read the trace stage
and, for the allocator's own numbers, the allocator stage; reporters render what they return.
"""
