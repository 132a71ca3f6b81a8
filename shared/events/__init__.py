"""Events out: CloudEvents 1.0 written through a transactional outbox."""
