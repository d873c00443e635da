"""In-memory adapters: real implementations of every port, for tests and a database-free run."""
