"""The desired-state model: what one environment should contain (its public surface: :mod:`.api`)."""
