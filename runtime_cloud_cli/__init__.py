"""The operator CLI: ``runtime-cloud``, a client of the host's HTTP API (and nothing else of the app).

It sends what a caller with the same token would send, so the host decides
what is allowed (scopes, roles, four eyes) exactly as for curl or the Studio.
"""
