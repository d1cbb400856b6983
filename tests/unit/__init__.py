"""Unit tests: pure, or on the in-memory store; no server. Folders mirror src/zerorename/."""
