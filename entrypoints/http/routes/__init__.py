"""Route handlers, one module per resource. Handlers call one use case each."""
