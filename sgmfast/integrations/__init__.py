"""Adapters for the ecosystem: Opacus and Google's dp_accounting.

Each adapter lives in its own module and imports its peer library only when that module is
imported (``import sgmfast`` never imports torch, opacus or dp_accounting).
"""
