"""The Manager web UI at /ui: pages rendered by the server (Jinja2) with a little of our own
JavaScript that calls the same REST API as every other client. Offline: nothing is loaded from
another host."""
