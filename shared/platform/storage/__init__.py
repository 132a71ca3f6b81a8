"""Azure Storage adapters: clients, resource bootstrap and conditional writes."""
