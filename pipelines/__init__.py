"""qday pipelines package."""
