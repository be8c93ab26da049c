"""Loopback fakes of the model providers' HTTP APIs, for contract tests of the real SDK clients."""
