"""Events out: CloudEvents 1.0 written through a transactional outbox; and the artifacts' outbox that
mirrors receipts, run outputs and drift reports to KnowledgeHost (``artifact_outbox``, ``artifact_dispatch``)."""
