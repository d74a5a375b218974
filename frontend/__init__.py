"""The server-rendered dashboard (templates + htmx) over the same selectors and services."""
