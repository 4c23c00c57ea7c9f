"""The home page at `/`: what this instance is and where to go next."""
