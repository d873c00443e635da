"""The conversation's engines (application.ports.engines): ``openai_compatible`` over OpenAI's wire format,
``offline`` built in, and the factory that builds them from an agent's resolved settings."""
