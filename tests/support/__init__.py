"""Test support: real Azurite and real local host processes, started per test session."""
