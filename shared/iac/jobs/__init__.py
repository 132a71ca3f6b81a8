"""Runner jobs: plan and apply run in a job process, and the run's orchestration waits for the result.

No Functions activity holds a long apply (``functionTimeout``), and the runner
needs no CLI on the Functions host. The protocol, one concept per module:

- :mod:`.protocol`: the request on the job queue, the job's input and result documents;
- :mod:`.store`: where they live -- input, result and engine events in blob
  (``runner-jobs/{tenant}/{environment}/{run}/{job}/``), the job's row with its
  heartbeat in table ``RunnerJobs`` (one partition per run);
- :mod:`.liveness`: from that row, is the job finished, running or dead;
- :mod:`.launcher`: hands a request to the job queue (in Azure a Container Apps
  job scaled by that queue picks it up; locally the local host's job scaler);
- :mod:`.event_log`: engine events and log lines streamed into the job's log blob.
- :mod:`.lock_owners`: whose is a Pulumi stack lock a dead job may have left (from the job rows);
- :mod:`.health`: the job path's health (queue answers, requests taken, heartbeats fresh);
- :mod:`.handover`: a plan job of an unattended run handed its apply, run in the same execution.

Invariants: a job id names one attempt of one step of one run
(``{run}-{plan|apply}-{attempt}``); its input is written once and read back
only if its SHA-256 matches the request's, so a job runs exactly the input the
app wrote; one execution claims the job's row (under its ETag) and every other
execution of the same request (a duplicated message) leaves at once. The app
decides retries (a new attempt is a new job), never the queue.
"""
