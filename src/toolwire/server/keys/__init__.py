"""Gateway keys: who is calling, what each key may see and decide, and its quotas."""
