"""The failure kernel: failure text -> normalized text -> signature, the infrastructure
patterns, and the backend keys that configure them. The store, the runner and incidents
all need it, so it sits low and imports nothing but ``documents/``."""
