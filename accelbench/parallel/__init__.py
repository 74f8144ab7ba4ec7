"""parallel layer."""
