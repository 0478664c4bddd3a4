"""tether-acp."""
