"""Pool autoscaling: capacity's pools grown and shrunk through provisioning runs.

It sits above both capacity and provisioning (which know nothing of each
other) and uses only their public operations. Where to read first:

- :mod:`shared.autoscaling.policy`: a pool's policy, every default listed;
- :mod:`shared.autoscaling.decide`: the pure decision (signals window, cooldowns,
  stabilization), the one the simulation benchmark drives;
- :mod:`shared.autoscaling.scaler`: an evaluation of one pool: sample, decide,
  and move the decision in flight one step (provision -> grow; drain ->
  remove -> shrink);
- :mod:`shared.autoscaling.infrastructure`: the pool's specification;
- :mod:`shared.autoscaling.store` and :mod:`shared.autoscaling.records`: what is kept.

This ``__init__`` imports nothing so that ``shared.wiring.settings`` can import the
settings section without pulling in storage code.
"""
