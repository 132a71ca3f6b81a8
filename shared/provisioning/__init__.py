"""Provisioning: desired state, plan -> approve -> apply runs, receipts (IaCProvisioningService)."""
