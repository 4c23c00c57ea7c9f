"""Social data: links to game-store, chat and streaming accounts, their connectors and snapshots."""
