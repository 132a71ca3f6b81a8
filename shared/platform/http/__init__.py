"""The HTTP pipeline shared by every trigger: auth, bodies, problem documents."""
