"""The composition root: each module's objects, built once per process from the settings and storage.

Triggers (``functions/``, ``orchestrations/``) take their services from here.
Below ``function_app.py`` only this package and the triggers read the settings
root (:func:`shared.wiring.settings.get_settings`; the triggers for their timer
schedules and a few limits); everything built here takes only the settings
sections it uses, so the domain packages, health and the request pipeline never
import the settings root, which imports their sections (pyproject.toml, the
"settings-root" contract). One module per domain module, one style:
``functools.lru_cache``'d factories without arguments. The request pipeline
sits below this package (the "layers" contract) and cannot ask it, so
``function_app.py`` hands it its ``Auth`` section at start
(:func:`shared.platform.http.endpoint.configure_authentication`).
"""
