"""Slurm adapter: one command runner, pure parsers, snapshot, actions."""
