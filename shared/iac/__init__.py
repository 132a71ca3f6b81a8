"""Infrastructure-as-code runners behind one interface."""
