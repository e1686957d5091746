"""Thin click commands of ``wattctl``: parse options, call the core, print (text or --json)."""
