"""Real carriers behind application.ports.carriers.Carrier: one module per carrier type."""
