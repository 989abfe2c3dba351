"""The dashboard served at ``/`` (issue 20): pages, charts, the cookie session and its CSRF
defences; see ``api.dashboard.pages``."""
