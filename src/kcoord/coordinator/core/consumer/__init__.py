"""KIP-848 consumer groups (the ``consumer`` group protocol): group state and the server-side assignors."""
