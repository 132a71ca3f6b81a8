"""The composition root: each module's objects, built once per process from the settings and storage.

Triggers (``functions/``, ``orchestrations/``) take their services from here.
This is the one place below ``function_app.py`` that reads the settings root
(:func:`shared.settings.get_settings`); everything it builds takes only the
settings sections it uses, so the domain packages never import the settings
root, which imports their sections. One module per domain module, one style:
``functools.lru_cache``'d factories without arguments.
"""
