"""Integration tests' helpers and the child processes they start (apart from the tests)."""
