"""The dashboard (issue 20)."""
