"""The release, in a module of its own: a module that needs it imports this, never the package root (which
imports the rule model and everything below it)."""

__version__ = "0.1.0"  # the package's version too: pyproject.toml reads it from here
