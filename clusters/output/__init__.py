"""How a request row reads in the API: the shared representation every kind's own
output (``clusters/kinds/<kind>/output.py``) builds on."""
