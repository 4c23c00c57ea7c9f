"""Wire shapes of social links and social data (spec 2.5)."""

from __future__ import annotations

from urllib.parse import urlsplit

import marshmallow as ma

from app.db import isoformat
from app.social.models import PLATFORMS

_LOOPBACK_HOSTS = {"localhost", "127.0.0.1", "::1"}


def _validate_return_to(value: str) -> None:
    parts = urlsplit(value)
    secure = parts.scheme == "https" or (parts.scheme == "http" and parts.hostname in _LOOPBACK_HOSTS)
    if secure and parts.hostname and not parts.fragment:
        return
    raise ma.ValidationError("Must be an absolute https URL (http only for loopback), without a fragment.")


class LinkIn(ma.Schema):
    return_to = ma.fields.String(
        required=True,
        validate=[ma.validate.Length(max=2048), _validate_return_to],
        metadata={
            "description": "Where the user is sent after linking, with `status=linked|error`, "
            "`platform` and (on error) `error` added to its query."
        },
    )


class LinkStartedOut(ma.Schema):
    authorization_url = ma.fields.String(required=True, metadata={"description": "Open this URL as the user."})
    expires_at = ma.fields.Function(lambda started: isoformat(started.expires_at), required=True)


class SocialLinkError(ma.Schema):
    code = ma.fields.String(required=True)
    detail = ma.fields.String(required=True)
    at = ma.fields.String(required=True)


class SocialLinkOut(ma.Schema):
    platform = ma.fields.String(required=True, validate=ma.validate.OneOf(PLATFORMS))
    account_id = ma.fields.String(required=True)
    status = ma.fields.String(
        required=True,
        validate=ma.validate.OneOf(["linked", "broken"]),
        metadata={
            "description": "`broken`: the platform refuses the link (revoked grant, account gone); link again. "
            "A fault of the service's own platform configuration leaves the link `linked` "
            "with `last_error` set; data returns once it is fixed."
        },
    )
    linked_at = ma.fields.Function(lambda link: isoformat(link.linked_at), required=True)
    last_fetched_at = ma.fields.Function(lambda link: isoformat(link.last_fetched_at), allow_none=True)
    last_error = ma.fields.Nested(SocialLinkError, allow_none=True)


class SocialLinksEnvelope(ma.Schema):
    data = ma.fields.List(ma.fields.Nested(SocialLinkOut), required=True)


class GameOut(ma.Schema):
    appid = ma.fields.String(required=True)
    name = ma.fields.String()
    playtime_2weeks = ma.fields.Integer(required=True)
    playtime_forever = ma.fields.Integer(required=True)


class PlatformAOut(ma.Schema):
    platform_a_id = ma.fields.String(required=True)
    personaname = ma.fields.String()
    profileurl = ma.fields.String()
    avatar = ma.fields.String()
    personastate = ma.fields.Integer()
    timecreated = ma.fields.Integer(metadata={"description": "Omitted for private profiles."})


class OwnedGamesOut(ma.Schema):
    game_count = ma.fields.Integer(required=True)
    games = ma.fields.List(ma.fields.Nested(GameOut), required=True)


class RecentGamesOut(ma.Schema):
    total_count = ma.fields.Integer(required=True)
    games = ma.fields.List(ma.fields.Nested(GameOut), required=True)


class GuildOut(ma.Schema):
    id = ma.fields.String(required=True)
    name = ma.fields.String(required=True)
    owner = ma.fields.Boolean(required=True)


class PlatformBOut(ma.Schema):
    email_verified = ma.fields.Boolean(metadata={"description": "Omitted when the platform does not say."})
    guilds = ma.fields.List(ma.fields.Nested(GuildOut), required=True)


class BroadcasterOut(ma.Schema):
    broadcaster_login = ma.fields.String(required=True)
    broadcaster_name = ma.fields.String(required=True)
    followed_at = ma.fields.String(required=True)


class FollowedChannelsOut(ma.Schema):
    total = ma.fields.Integer(required=True)
    broadcasters = ma.fields.List(ma.fields.Nested(BroadcasterOut), required=True)


class PlatformCOut(ma.Schema):
    username = ma.fields.String(required=True)
    view_count = ma.fields.Integer()
    follower_count = ma.fields.Integer(required=True)
    followed_channels = ma.fields.Nested(FollowedChannelsOut, required=True)


class SocialDataOut(ma.Schema):
    """Spec 2.5. Members of platforms not linked (or not yet fetched) are omitted."""

    platform_a = ma.fields.Nested(PlatformAOut)
    owned_games = ma.fields.Nested(OwnedGamesOut, metadata={"description": "Omitted when game details are private."})
    recent_played_games = ma.fields.Nested(RecentGamesOut)
    platform_b = ma.fields.Nested(PlatformBOut)
    platform_c = ma.fields.Nested(PlatformCOut)
