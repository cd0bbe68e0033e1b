"""Sphinx configuration: the API reference, built from docstrings (``make docs``).

The build is strict (``-W -n``): a warning or a reference to an
amqp-sansio name that does not exist fails it.  References to other
projects (the standard library, Trio, attrs, PySpark) are not checked --
there is no network for their inventories.
"""

from __future__ import annotations

import amqp_sansio

project = "amqp-sansio"
release = version = amqp_sansio.__version__
extensions = ["sphinx.ext.autodoc"]
exclude_patterns = ["_build"]
html_theme = "alabaster"
html_static_path: list[str] = []

autodoc_default_options = {"members": True, "undoc-members": True, "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_class_signature = "separated"
# "Parameters" from a class's own and its __init__'s docstrings.
autoclass_content = "both"

nitpicky = True
nitpick_ignore_regex = [
    # Only amqp-sansio's own names must resolve ...
    (r"py:.*", r"(?!amqp_sansio).*"),
    # ... and of those only the public ones: private modules and names
    # (_specbase, _generated, _common, _Single...) are not in the reference.
    (r"py:.*", r"amqp_sansio\w*(\.\w+)*\._\w+.*"),
]
# A short name that two modules define (Session, Connection, Message) still
# links to one of them; only a name that exists nowhere is an error.
suppress_warnings = ["ref.python"]
