"""A small local Functions host for development and tests.

Azure Functions Core Tools cannot be installed on machines without internet
access, so this host loads ``function_app.py`` unchanged, reads the app's own
function metadata, and serves its HTTP, queue and timer triggers against
Azurite. In Azure the real Functions host runs the same app.
"""
