"""The runner job: one plan or apply of one run, in a process of its own.

In Azure this package is the command of a Container Apps job (event-driven,
scaled by the ``runner-jobs`` queue, running as the runner identity):
``python -m runner_job once`` takes one request and runs it. Locally the local
host starts ``python -m runner_job scale``, which reads the same queue and
forks one process per request (imports already loaded, so a launch costs
milliseconds, and each job is still its own process that can be killed).

- :mod:`.execute`: runs the runner on a job's input and turns what it raises into a result;
- :mod:`.job`: one request end to end -- claim, heartbeat, execute, result, completion notice;
- :mod:`.heartbeat`: the thread that keeps the job's row fresh;
- :mod:`.scaler`: the local stand-in for the queue-scaled Container Apps job.

It sits beside ``functions`` in the layers (see pyproject.toml): an entry
point of its own that takes its objects from the settings, never imported by
the app.
"""
