"""The user profile: its fields, their formats and validation."""
