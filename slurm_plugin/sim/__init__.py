"""The simulator: replays a trace through the same policy code as the live path."""
