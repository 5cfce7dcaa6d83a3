"""Examples that use Memory Console through its REST API only (see README.md)."""
