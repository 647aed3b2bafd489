"""Reporters: an analysis's result rendered for people or for other tools.

One module per report, named as the command that makes it (``peak``, ``fit``, ``oom``, ``report``,
``export``...). Every reporter keeps one contract: ``to_json(result, ...) -> dict`` gives the
machine-readable document (each with its ``schema``, written by :func:`.common.write_json`), and
``render_<format>(result, out, ...)`` writes the result to a text stream in that format:
``render_text`` for the terminal (fitted to its width by :mod:`.tables`), ``render_html`` for a
self-contained page, ``render_csv``, ``render_chrome`` (Trace Event Format), ``render_dot``,
``render_graphml``. Reporters never open files or parse options: the command hands them the stream
that :func:`.common.open_output` opened.

What they share: :mod:`.common` (names from traces made safe for a terminal and for HTML, tables,
JSON, the output file, the pages' assets), :mod:`.tables` (fitting text to the terminal),
:mod:`.icicle` (the live set drawn by name scope), :mod:`.progress` (the progress line while a
large trace is read), and ``assets/`` (the pages' stylesheets and scripts, as files, inlined into
each page when it is rendered).
"""
