"""HTTP connectors to the three linked platforms (pure: no Flask, configured by arguments)."""

from app.social.connectors.errors import (
    BudgetExhausted,
    ConnectorError,
    LinkBroken,
    MalformedAnswer,
    PlatformMisconfigured,
    PlatformUnavailable,
    RateLimited,
    TokenExpired,
    retry_delay,
)
from app.social.connectors.oauth import OAuthApp, TokenSet, call_with_refresh
from app.social.connectors.platform_a import GameStoreConnector
from app.social.connectors.platform_b import ChatConnector
from app.social.connectors.platform_c import StreamingConnector

__all__ = [
    "BudgetExhausted",
    "ChatConnector",
    "ConnectorError",
    "GameStoreConnector",
    "LinkBroken",
    "MalformedAnswer",
    "OAuthApp",
    "PlatformMisconfigured",
    "PlatformUnavailable",
    "RateLimited",
    "StreamingConnector",
    "TokenExpired",
    "TokenSet",
    "call_with_refresh",
    "retry_delay",
]
