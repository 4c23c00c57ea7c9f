"""Problems of the social feature, one class per response shape."""

from __future__ import annotations

from app.errors import BadRequest, DomainError, NotFound


class UnknownPlatform(NotFound):
    status, code, title = 404, "unknown_platform", "Unknown platform"


class SocialLinkNotFound(NotFound):
    status, code, title = 404, "social_link_not_found", "Social link not found"


class LinkStateInvalid(BadRequest):
    status, code, title = 400, "invalid_link_state", "Invalid or expired link state"


class LinkBrowserRefused(DomainError):
    """The platform sent back a browser that is not signed in as the user the link is for (RFC 6749
    §10.12): the link was started for someone else, or this browser must sign in first."""

    status, code, title = 403, "link_browser_refused", "Not the browser of the user being linked"


class PlatformNotConfigured(DomainError):
    status, code, title = 503, "platform_not_configured", "Platform not configured"


class FetchDeferred(Exception):
    """A fetch must run again in `seconds` (rate limit or transient fault); nothing was written."""

    def __init__(self, seconds: float, reason: str) -> None:
        super().__init__(reason)
        self.seconds = seconds


class LinkedSignInRefused(DomainError):
    """A linked account cannot sign this person in; `detail` is written for them (the sign-in page
    shows it)."""

    status, code, title = 403, "linked_sign_in_refused", "Sign-in with a linked account refused"


class LinkedSignInOff(LinkedSignInRefused):
    status, code, title = 404, "linked_sign_in_off", "Sign-in with this platform is not offered"


class LinkedAccountUnproven(LinkedSignInRefused):
    status, code, title = 400, "linked_account_unproven", "The platform did not prove the account"


class LinkedAccountUnknown(LinkedSignInRefused):
    code, title = "linked_account_unknown", "No account is linked to this platform account"


class LinkedSignUpClosed(LinkedSignInRefused):
    code, title = "linked_sign_up_closed", "Accounts cannot be created by a linked account here"


class LinkedEmailUnverified(LinkedSignInRefused):
    code, title = "linked_email_unverified", "The platform did not verify the e-mail address"


class LinkedAccountAmbiguous(LinkedSignInRefused):
    code, title = "linked_account_ambiguous", "The platform account is linked to more than one account"


class LinkedEmailOfAnotherUser(LinkedSignInRefused):
    """The platform's verified e-mail address is an existing user's, whose account it may not take
    over: `pending` is linked only once that user signs in another way (see `sign_in.link_pending`)."""

    code, title = "linked_email_of_another_user", "The e-mail address belongs to an existing account"

    def __init__(self, detail: str, *, pending: dict) -> None:
        super().__init__(detail)
        self.pending = pending


class LinkedPlatformUnavailable(LinkedSignInRefused):
    status, code, title = 503, "linked_platform_unavailable", "The platform could not be reached"
