"""Code hosts: the interface Quorum needs (``base``), one client per provider, fetching a pull
request as a review input, and the summary comment. Plain Python, no Django."""
