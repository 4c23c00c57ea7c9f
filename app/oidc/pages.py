"""The hosted pages of the authorization endpoint: login by e-mail code, consent, logout.

Plain HTML forms that work without JavaScript. Every form carries a CSRF token (an HMAC of the
browser cookie, checked on submit); pages send a CSP without inline script, `X-Frame-Options:
DENY` and `no-store`; cookies are HttpOnly, SameSite=Lax, and Secure when the issuer is https.
"""

from __future__ import annotations

import hashlib
import hmac
from urllib.parse import urlencode, urlsplit

from flask import Blueprint, Response, current_app, redirect, render_template, request, url_for
from flask_limiter.errors import RateLimitExceeded
from werkzeug.routing import Rule

from app.db import commit_before_the_edge
from app.errors import DomainError
from app.extensions import api, limiter
from app.http import accepts
from app.oidc import account, authorize, branding, device, linked, par, request_objects, subjects
from app.oidc import account_sign_in as account_sign_in_service
from app.oidc.authorize import LoginStep, Outcome
from app.oidc.claims import APP_CLAIMS_SCOPE, CLAIM_ITEM_PREFIX, SCOPE_CLAIMS, RequestedClaims
from app.oidc.errors import AuthorizationPageError, AuthorizationRedirectError
from app.oidc.limits import network_retry_after, sign_in_network
from app.oidc.models import AccountSignIn, AuthorizationRequest
from app.oidc.recaptcha import LOGIN_ACTION
from app.oidc.service import get_relying_party
from app.oidc.settings import OidcSettings
from app.security import random_token, texts_equal
from app.settings import current
from app.social import service as social_service
from app.tenancy.models import Client
from app.tenancy.service import client_id_of_privacy_reference, privacy_link
from app.web.pages import page_security_headers

blp = Blueprint(
    "oidc_pages",
    __name__,
    template_folder="templates",
    static_folder="static",
    static_url_path="/v1/openidc/static",
)

FORM = "application/x-www-form-urlencoded"
BROWSER_COOKIE = "tessera_browser"
SESSION_COOKIE = "tessera_sso"
COOKIE_PATH = "/v1/openidc"
# The home page reads the session cookie too (whether the browser is signed in).
SESSION_COOKIE_PATH = "/"
_BROWSER_COOKIE_AGE = 365 * 24 * 3600
_RECAPTCHA_ORIGINS = "https://www.google.com/recaptcha/ https://www.gstatic.com/recaptcha/"
_TOO_MANY_ATTEMPTS = "Too many sign-in attempts from your network. Wait a minute and try again."
SCOPE_DESCRIPTIONS = {
    "openid": "Your account identifier and DID",
    "profile": "Your name, username, picture, gender, birth date and language",
    "email": "Your e-mail address",
    "phone": "Your phone number",
    "address": "Your country, region and city",
    "app_claims": "These details from your profile, under the names the application uses",
    "credentials": "Your verified credentials",
    "offline_access": "Stay connected while you are away (until you sign out of it or it expires)",
}

# Claims a request asks for one by one (the `claims` parameter), each listed on the consent page.
CLAIM_DESCRIPTIONS = {
    "name": "Your full name",
    "given_name": "Your first name",
    "family_name": "Your last name",
    "middle_name": "Your middle name",
    "preferred_username": "Your username",
    "picture": "Your picture",
    "gender": "Your gender",
    "birthdate": "Your birth date",
    "locale": "Your language",
    "email": "Your e-mail address",
    "email_verified": "Whether your e-mail address is verified",
    "phone_number": "Your phone number",
    "phone_number_verified": "Whether your phone number is verified",
    "address": "Your country, region and city",
}


# What `openid` releases to a pairwise client: its own identifier of the user, never the id or DID.
PAIRWISE_OPENID_DESCRIPTION = "An identifier of your account for this application (not your account number or DID)"


def _item_description(item: str, essential: frozenset[str], *, pairwise: bool = False) -> str:
    """How the consent page names an item; a claim the application says it needs says so."""
    if item == "openid" and pairwise:
        return PAIRWISE_OPENID_DESCRIPTION
    if not item.startswith(CLAIM_ITEM_PREFIX):
        return SCOPE_DESCRIPTIONS.get(item, item)
    name = item[len(CLAIM_ITEM_PREFIX) :]
    return CLAIM_DESCRIPTIONS.get(name, name) + (" (required by the application)" if name in essential else "")


@blp.record_once
def _setup(state) -> None:
    _document_browser_endpoints()


def _document_browser_endpoints() -> None:
    """Put the browser-facing endpoints a relying party links to into the OpenAPI document."""

    def query(name: str, description: str, required: bool = False) -> dict:
        return {
            "name": name,
            "in": "query",
            "required": required,
            "description": description,
            "schema": {"type": "string"},
        }

    html = {"text/html": {"schema": {"type": "string"}}}
    authorize_parameters = [
        query("response_type", "`code`.", True),
        query("client_id", "The client's numeric id as a string.", True),
        query("redirect_uri", "Exactly one of the client's registered redirect URIs.", True),
        query(
            "scope",
            "Space-separated; must include `openid`, which alone releases, after the user's consent, "
            "`user_id`, the client's own claims (its `id_token_claims` mapping, each listed on the consent "
            "page; asked again whenever the mapping changes) and, while the client `reads_credentials`, "
            "`GET /v1/openidc/credentials`. `profile`, `email`, `phone` and `address` add their standard "
            "claims. Naming `app_claims` or `credentials` narrows the release to the ones named.",
            True,
        ),
        query("state", "Returned unchanged to the client."),
        query("nonce", "Copied into the id_token."),
        query("prompt", "`none`, `login`, `consent` or `select_account`."),
        query("max_age", "Seconds since the last sign-in after which the user must sign in again."),
        query("login_hint", "E-mail address to prefill on the sign-in page."),
        query("code_challenge", "PKCE challenge (RFC 7636)."),
        query("code_challenge_method", "`S256` (the only method supported)."),
        query(
            "request_uri",
            "From `POST /v1/openidc/par` (single use): then only `client_id` is sent beside it and "
            "every other parameter comes from the pushed request.",
        ),
        query(
            "request",
            "A request object (RFC 9101): a JWT signed with a key of the client's `jwks` or `jwks_uri` "
            "(RS256, PS256, ES256, EdDSA), `iss` the client_id, `aud` the issuer, with `exp`; its "
            "parameters win over those sent beside it. Refused: `invalid_request_object`.",
        ),
        query(
            "claims",
            "JSON (OpenID Connect Core 5.5): standard claims asked for in the `id_token` and at `userinfo`, "
            "each listed on the consent page; `acr` with `value`/`values` chooses the sign-in class.",
        ),
        query("acr_values", "Space-separated sign-in classes, in order of preference."),
    ]
    authorize_responses = {
        "302": {
            "description": "To the sign-in or consent page, or back to `redirect_uri` with `code`, `state`"
            " and `iss` (or `error`)."
        },
        "400": {
            "description": "Unknown client or unregistered redirect_uri: an error page, never a redirect.",
            "content": html,
        },
    }
    api.spec.path(
        rule=Rule("/v1/openidc/authorize"),
        operations={
            "get": {
                "tags": ["oidc"],
                "summary": "OpenID authorization endpoint (hosted sign-in by e-mail code)",
                "parameters": authorize_parameters,
                "responses": authorize_responses,
            },
            "post": {
                "tags": ["oidc"],
                "summary": "OpenID authorization endpoint, form-encoded; continues as GET",
                "responses": {"303": {"description": "The same request as a GET."}},
            },
        },
    )
    api.spec.path(
        rule=Rule("/v1/openidc/device"),
        operations={
            "get": {
                "tags": ["oidc"],
                "summary": "The device page (RFC 8628 `verification_uri`): the user enters the device's user code",
                "parameters": [query("user_code", "Prefilled from `verification_uri_complete`; the user confirms it.")],
                "responses": {"200": {"description": "The page.", "content": html}},
            },
            "post": {
                "tags": ["oidc"],
                "summary": "The user code entered: continues with the code flow's sign-in and consent pages",
                "responses": {
                    "303": {"description": "To the sign-in or consent page of the device authorization."},
                    "400": {"description": "Unknown, expired or decided user code: the page again.", "content": html},
                    "429": {"description": "Too many codes entered from this network.", "content": html},
                },
            },
        },
    )
    api.spec.path(
        rule=Rule("/v1/openidc/account"),
        operations={
            "get": {
                "tags": ["oidc"],
                "summary": "The account page of a signed-in person: their passkeys (add, remove) and signing out",
                "description": "Needs a single sign-on session whose sign-in met its organisation's sign-in "
                "policy; any other browser is sent to `/v1/openidc/account/sign-in`.",
                "responses": {
                    "200": {"description": "The page.", "content": html},
                    "303": {"description": "Not signed in: to the account page's sign-in."},
                },
            },
        },
    )
    api.spec.path(
        rule=Rule("/v1/openidc/account/sign-in"),
        operations={
            "get": {
                "tags": ["oidc"],
                "summary": "Sign in to the account page without an application (the home page's Sign in link)",
                "description": "The e-mail code (one code for every account of the address) or a passkey; then "
                "the organisation's sign-in policy, as for an application, and the account page.",
                "responses": {
                    "200": {"description": "The page.", "content": html},
                    "303": {"description": "Already signed in: to the account page."},
                },
            },
        },
    )
    api.spec.path(
        rule=Rule("/privacy/<reference>"),
        operations={
            "get": {
                "tags": ["oidc"],
                "summary": "Default privacy page of a client (linked from its sign-in pages)",
                "parameters": [
                    {
                        "name": "reference",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string"},
                        "description": "`<client_id>-<tag>` exactly as in the client's `privacy_link`; "
                        "a bare client id is not enough.",
                    }
                ],
                "responses": {
                    "200": {"description": "The page.", "content": html},
                    "404": {"description": "Unknown or disabled client, or a wrong tag.", "content": html},
                },
            },
        },
    )
    logout_parameters = {
        "id_token_hint": "An id_token of the user signed in here; otherwise the user confirms.",
        "client_id": "The client, when no id_token_hint is sent.",
        "post_logout_redirect_uri": "A redirect URI registered for the client.",
        "state": "Returned unchanged.",
    }
    logout_responses = {
        "200": {"description": "Confirmation or signed-out page.", "content": html},
        "303": {"description": "To post_logout_redirect_uri."},
    }
    back_channel = (
        "Ending the session sends an OpenID Connect Back-Channel Logout 1.0 request to every client "
        "that received tokens in it (id tokens carry its `sid`) and registered a `backchannel_logout_uri`: "
        "a worker job (`oidc.backchannel_logout`) POSTs the form `logout_token=<JWT>` there "
        "(`BackchannelLogoutRequest`; the token's claims are `LogoutTokenClaims`, header `typ: logout+jwt`, "
        "verified with the keys at `/certs/jwks.json`), retrying network errors, 429 and 5xx with backoff. "
        "Disabling a user (`flask users disable`) ends their sessions the same way."
    )
    api.spec.components.schema(
        "LogoutTokenClaims",
        {
            "type": "object",
            "description": "Claims of a back-channel logout token (a JWT signed like the client's id tokens).",
            "required": ["iss", "aud", "iat", "exp", "jti", "sub", "sid", "events"],
            "properties": {
                "iss": {"type": "string", "description": "The issuer."},
                "aud": {"type": "string", "description": "The client id."},
                "iat": {"type": "integer"},
                "exp": {"type": "integer", "description": "Two minutes after iat."},
                "jti": {"type": "string", "description": "Unique per token."},
                "sub": {
                    "type": "string",
                    "description": "The user, as the id token names it.",
                },
                "sid": {"type": "string", "description": "The ended session, as in the id token's sid."},
                "events": {
                    "type": "object",
                    "description": '`{"http://schemas.openid.net/event/backchannel-logout": {}}`.',
                },
            },
        },
    )
    api.spec.components.schema(
        "BackchannelLogoutRequest",
        {
            "type": "object",
            "description": "The form body POSTed to a client's `backchannel_logout_uri`; answer 2xx once handled "
            "(4xx other than 429 is not retried).",
            "required": ["logout_token"],
            "properties": {"logout_token": {"type": "string", "description": "JWT with `LogoutTokenClaims`."}},
        },
    )
    api.spec.path(
        rule=Rule("/v1/openidc/logout"),
        operations={
            "get": {
                "tags": ["oidc"],
                "summary": "RP-initiated logout (the discovery `end_session_endpoint`)",
                "description": "Ends the browser's single sign-on session at once when `id_token_hint` is an "
                "id_token of the user signed in here, else after the user confirms. " + back_channel,
                "parameters": [query(name, text) for name, text in logout_parameters.items()],
                "responses": logout_responses,
            },
            "post": {
                "tags": ["oidc"],
                "summary": "RP-initiated logout by form, and the confirmation page's answer",
                "description": "The same parameters as the GET, form-encoded; with `confirm=yes` and the page's "
                "`csrf_token` the user's confirmation. " + back_channel,
                "requestBody": {
                    "content": {
                        "application/x-www-form-urlencoded": {
                            "schema": {
                                "type": "object",
                                "properties": {
                                    **{
                                        name: {"type": "string", "description": text}
                                        for name, text in logout_parameters.items()
                                    },
                                    "confirm": {
                                        "type": "string",
                                        "enum": ["yes"],
                                        "description": "The user confirmed on the logout page.",
                                    },
                                    "csrf_token": {
                                        "type": "string",
                                        "description": "From the logout page (with confirm).",
                                    },
                                },
                            }
                        }
                    }
                },
                "responses": {
                    **logout_responses,
                    "403": {"description": "A confirmation without a valid csrf_token.", "content": html},
                },
            },
        },
    )


def _secure_cookies() -> bool:
    return current(OidcSettings).issuer.startswith("https://")


def _browser_token() -> tuple[str, bool]:
    """This browser's random token, and whether it is new (then the response must set it)."""
    existing = request.cookies.get(BROWSER_COOKIE, "")
    if 32 <= len(existing) <= 64:
        return existing, False
    return random_token(32), True


def csrf_token(browser_token: str) -> str:
    key = current_app.config["SECRET_KEY"].encode()
    return hmac.new(key, b"csrf:" + browser_token.encode(), hashlib.sha256).hexdigest()


def _check_csrf(browser_token: str) -> None:
    submitted = request.form.get("csrf_token", "")
    if not browser_token or not texts_equal(submitted, csrf_token(browser_token)):
        raise AuthorizationPageError(
            "This form has expired or was not sent from our page. Go back to the application and start again.",
            status=403,
            code="invalid_csrf_token",
            detail="csrf_token is missing or does not match this browser.",
        )


def _set_cookie(response: Response, name: str, value: str, max_age: int, path: str = COOKIE_PATH) -> None:
    response.set_cookie(
        name, value, max_age=max_age, path=path, secure=_secure_cookies(), httponly=True, samesite="Lax"
    )


def _set_session_cookie(response: Response, session_token: str) -> None:
    _set_cookie(response, SESSION_COOKIE, session_token, current(OidcSettings).session_ttl, SESSION_COOKIE_PATH)
    # A session cookie set under the pages' path (before the home page read it) would shadow this one there.
    _delete_cookie(response, SESSION_COOKIE, COOKIE_PATH)


def _delete_cookie(response: Response, name: str, path: str) -> None:
    response.delete_cookie(name, path=path, secure=_secure_cookies(), httponly=True, samesite="Lax")


def _origin(url: str | None) -> str:
    if not url:
        return ""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else ""


def _secure(response: Response, *, client=None, redirect_uri: str | None = None, style: str | None = None) -> Response:
    """Security headers of every page; the form-action allows the client's redirect target, because
    browsers apply form-action to the redirect that follows a form submission. `style` is the one
    inline stylesheet a page may carry (the client's branding), allowed by its hash."""
    recaptcha = bool(client is not None and client.recaptcha_enabled)
    script = "'self'" + (f" {_RECAPTCHA_ORIGINS}" if recaptcha else "")
    frame = _RECAPTCHA_ORIGINS if recaptcha else "'none'"
    form_action = " ".join(part for part in ("'self'", _origin(redirect_uri)) if part)
    style_src = "'self'" + (f" '{branding.style_hash(style)}'" if style else "")
    csp = (
        f"default-src 'none'; script-src {script}; style-src {style_src}; img-src 'self' https: data:; "
        f"connect-src 'self'{' ' + _RECAPTCHA_ORIGINS if recaptcha else ''}; frame-src {frame}; "
        f"form-action {form_action}; frame-ancestors 'none'; base-uri 'none'"
    )
    response.headers.update(page_security_headers(csp))
    response.headers["Cache-Control"] = "no-store"
    response.headers["Pragma"] = "no-cache"
    return response


def _page(
    template: str,
    status: int = 200,
    *,
    browser_token: str,
    client=None,
    redirect_uri=None,
    new_browser: bool = False,
    **context,
) -> Response:
    style = branding.brand_style(client.accent_color) if client is not None else None
    html = render_template(
        f"oidc/{template}",
        client=client,
        privacy_link=privacy_link(client) if client is not None else None,
        privacy_href=_privacy_href(client, context.get("handle")) if client is not None else None,
        brand_style=style,
        csrf_token=csrf_token(browser_token),
        recaptcha_action=LOGIN_ACTION,
        recaptcha_script=current(OidcSettings).recaptcha_script_url,
        **context,
    )
    response = _secure(
        Response(html, status=status, mimetype="text/html"), client=client, redirect_uri=redirect_uri, style=style
    )
    if new_browser:
        _set_cookie(response, BROWSER_COOKIE, browser_token, _BROWSER_COOKIE_AGE)
    return response


def _privacy_href(client, handle: str | None) -> str:
    """The client's privacy link; our own default page also learns the way back to this sign-in."""
    link = privacy_link(client)
    if handle and not client.privacy_link:
        return f"{link}?{urlencode({'back': url_for('oidc_pages.login', request=handle)})}"
    return link


def _back_target(value: str) -> str | None:
    """A way back from the privacy page: only a path of this service's sign-in pages, never elsewhere."""
    if value.startswith("/v1/openidc/") and "//" not in value and "\\" not in value and value.isascii():
        return value
    return None


def _redirect(
    location: str,
    *,
    code: int = 302,
    browser_token: str | None = None,
    new_browser: bool = False,
    session_token: str | None = None,
) -> Response:
    response = _secure(redirect(location, code=code))
    if new_browser and browser_token:
        _set_cookie(response, BROWSER_COOKIE, browser_token, _BROWSER_COOKIE_AGE)
    if session_token:
        _set_session_cookie(response, session_token)
    return response


@blp.errorhandler(AuthorizationPageError)
def _error_page(error: AuthorizationPageError) -> Response:
    browser_token, new = _browser_token()
    response = _page(
        "error.html",
        error.status,
        browser_token=browser_token,
        new_browser=new,
        message=error.message,
        error_code=error.code,
        error_detail=error.detail,
    )
    if error.retry_after is not None:
        response.headers["Retry-After"] = str(error.retry_after)
    return response


@blp.errorhandler(RateLimitExceeded)
def _rate_limited_page(error: RateLimitExceeded) -> Response:
    browser_token, new = _browser_token()
    response = _page(
        "error.html",
        429,
        browser_token=browser_token,
        new_browser=new,
        message=_TOO_MANY_ATTEMPTS,
        error_code="slow_down",
        error_detail="The sign-in rate limit of this network address was hit.",
    )
    response.headers["Retry-After"] = error.get_response().headers.get("Retry-After", "60")
    return response


def _login_rate_limit() -> str:
    return current(OidcSettings).login_rate_limit


def _login_rate_key() -> str:
    """Sign-in attempts are limited per network (IPv4 address or IPv6 /64; per issuer, so deployments
    may share Redis)."""
    return f"oidc-login:{current(OidcSettings).issuer}:{sign_in_network(request.remote_addr)}"


def _limit_network_in_database() -> None:
    """Without Redis the rate limiter counts in process memory, which every process has its own
    of; then the sign-in limit per network address is counted in the database as well."""
    config = current_app.config
    if not config.get("RATELIMIT_ENABLED", True) or not config["RATELIMIT_STORAGE_URI"].startswith("memory://"):
        return
    retry_after = network_retry_after(request.remote_addr, _login_rate_limit())
    if retry_after is not None:
        raise AuthorizationPageError(_TOO_MANY_ATTEMPTS, status=429, retry_after=retry_after)


_STEP_PAGES = {"consent": "oidc_pages.consent", "passkey": "oidc_pages.passkey_step", "login": "oidc_pages.login"}


def _step_page(handle: str, outcome: Outcome, browser_token: str, *, code: int = 303) -> Response:
    if outcome.redirect_to:
        return _redirect(outcome.redirect_to, code=code, session_token=outcome.session_token)
    endpoint = _STEP_PAGES.get(outcome.page or "login", "oidc_pages.login")
    return _redirect(url_for(endpoint, request=handle), code=code, session_token=outcome.session_token)


@blp.route("/v1/openidc/authorize", methods=["GET", "POST"])
@accepts(FORM)
def authorization():
    """OpenID authorization endpoint: sends the browser to login, consent, or back with a code."""
    if request.method == "POST":
        # A cross-site POST carries no SameSite=Lax cookie: continue as a GET so SSO can apply.
        # Every field is carried as sent (repeated ones too, so the GET can refuse them).
        query = urlencode(list(request.form.items(multi=True)))
        return _redirect(f"{url_for('oidc_pages.authorization')}?{query}", code=303)
    browser_token, new_browser = _browser_token()
    values = request.args.to_dict()
    repeated = frozenset(name for name, given in request.args.lists() if len(given) > 1)
    pushed, signed = bool(values.get("request_uri")), False
    if pushed:
        (values, signed), repeated = par.redeem_request(values), frozenset()
    else:
        request_objects.prefetch_keys(values)
    try:
        params = authorize.validate_authorization_request(values, repeated, pushed=pushed, signed=signed)
    except AuthorizationRedirectError as error:
        return _redirect(error.location)
    outcome = authorize.start_authorization(
        params, browser_token=browser_token, session_token=request.cookies.get(SESSION_COOKIE)
    )
    if outcome.redirect_to:
        return _redirect(outcome.redirect_to, browser_token=browser_token, new_browser=new_browser)
    endpoint = _STEP_PAGES.get(outcome.page or "login", "oidc_pages.login")
    return _redirect(url_for(endpoint, request=outcome.handle), browser_token=browser_token, new_browser=new_browser)


def _login_page(step: LoginStep, handle: str, browser_token: str, *, code_sent: bool, status: int = 200) -> Response:
    request_row = step.request
    return _page(
        "login_code.html" if code_sent else "login_email.html",
        status,
        browser_token=browser_token,
        client=step.client,
        redirect_uri=request_row.redirect_uri,
        handle=handle,
        email=request_row.email or request_row.login_hint or "",
        message=step.message,
        error=step.error,
        ttl_minutes=current(OidcSettings).login_code_ttl // 60,
        passkey_options=None if code_sent else authorize.login_passkey_options(request_row, step.client),
        linked_buttons=[] if code_sent else linked.linked_buttons(step.client),
        actions=_LOGIN_ACTIONS,
    )


# Where the sign-in pages' forms go: an application's sign-in, or the account page's own.
_LOGIN_ACTIONS = {
    "email": "oidc_pages.send_code",
    "code": "oidc_pages.check_code",
    "passkey": "oidc_pages.check_passkey",
    "restart": "oidc_pages.login",
}
_ACCOUNT_SIGN_IN_ACTIONS = {
    "email": "oidc_pages.account_send_code",
    "code": "oidc_pages.account_check_code",
    "passkey": "oidc_pages.account_check_passkey",
    "restart": "oidc_pages.account_sign_in",
}


def _posted_request() -> tuple[str, str, AuthorizationRequest, Client]:
    """The authorization request a posted page form continues, once its CSRF token is checked.

    Returns (browser token, request handle, request, client); raises `AuthorizationPageError`.
    """
    browser_token, _ = _browser_token()
    _check_csrf(browser_token)
    handle = request.form.get("request", "")
    request_row, client = authorize.require_request(handle, browser_token)
    return browser_token, handle, request_row, client


@blp.route("/v1/openidc/login", methods=["GET"])
def login():
    """The sign-in page: asks for the e-mail address."""
    browser_token, _ = _browser_token()
    handle = request.args.get("request", "")
    request_row, client = authorize.require_request(handle, browser_token)
    if authorize.signed_in_for(request_row):
        return _redirect(url_for("oidc_pages.consent", request=handle))
    return _login_page(LoginStep(request_row, client), handle, browser_token, code_sent=False)


@blp.route("/v1/openidc/login", methods=["POST"])
@limiter.limit(_login_rate_limit, key_func=_login_rate_key)
@accepts(FORM)
def send_code():
    """Mail a one-time code to the address (if it has an account) and ask for the code."""
    _limit_network_in_database()
    browser_token, handle, request_row, client = _posted_request()
    step = authorize.send_login_code(
        request_row,
        client,
        request.form.get("email", ""),
        recaptcha_token=request.form.get("g-recaptcha-response"),
        remote_ip=request.remote_addr,
    )
    return _login_page(step, handle, browser_token, code_sent=not step.error, status=step.status if step.error else 200)


@blp.route("/v1/openidc/login/code", methods=["POST"])
@limiter.limit(_login_rate_limit, key_func=_login_rate_key)
@accepts(FORM)
def check_code():
    """Check the one-time code; on success sign the browser in and continue the authorization."""
    _limit_network_in_database()
    browser_token, handle, request_row, client = _posted_request()
    result = authorize.verify_login_code(request_row, client, request.form.get("code", ""))
    if isinstance(result, LoginStep):
        # A refused code is answered with the page again (200); the attempt it used up must stand.
        commit_before_the_edge("a refused login code still counts as an attempt")
        return _login_page(result, handle, browser_token, code_sent=True)
    return _step_page(handle, result, browser_token)


@blp.route("/v1/openidc/login/linked/<platform>", methods=["GET"])
def start_linked_sign_in(platform: str):
    """ "Sign in with Steam/Discord/Twitch": off to the platform, bound to this browser's sign-in."""
    browser_token, _ = _browser_token()
    handle = request.args.get("request", "")
    request_row, client = authorize.require_request(handle, browser_token)
    return _redirect(linked.start_linked_sign_in(request_row, client, platform), code=303)


@blp.route("/v1/openidc/login/linked/<platform>/callback", methods=["GET"])
@limiter.limit(_login_rate_limit, key_func=_login_rate_key)
def linked_callback(platform: str):
    """Back from the platform: verify the account as linking does, then sign in with it or show why not.
    Counted against the same limits as the e-mail code."""
    _limit_network_in_database()
    browser_token, _ = _browser_token()
    result = linked.finish_linked_sign_in(platform, request.args.to_dict(), request.cookies.get(BROWSER_COOKIE))
    if result.step is not None:
        commit_before_the_edge("a refused linked-account sign-in still spends its state and counts as an attempt")
        return _login_page(result.step, result.handle, browser_token, code_sent=False, status=result.step.status)
    return _step_page(result.handle, result.outcome, browser_token)


@blp.route("/v1/openidc/social/<platform>/link", methods=["GET"])
def finish_social_link(platform: str):
    """Back from a platform where the user proved an account to link (its callback,
    `/v1/social/{platform}/callback`, leads here, where the sign-in cookie is sent): linked only in
    the browser signed in as the user the link is for; any other browser gets a page saying so, and
    nothing is linked."""
    signed_in = account.find_account(request.cookies.get(SESSION_COOKIE))
    try:
        return_to = social_service.complete_link(
            platform, request.args.to_dict(), signed_in.user.id if signed_in is not None else None
        )
    except DomainError as refused:
        raise AuthorizationPageError(
            refused.detail, status=refused.status, code=refused.code, detail=refused.title
        ) from None
    return _redirect(return_to)


@blp.route("/v1/openidc/login/passkey", methods=["GET"])
def passkey_step():
    """The passkey step of a sign-in that needs more than its first step (or a refusal to show)."""
    browser_token, _ = _browser_token()
    handle = request.args.get("request", "")
    request_row, client = authorize.require_request(handle, browser_token)
    return _passkey_step_page(request_row, client, handle, browser_token)


def _passkey_step_page(
    request_row: AuthorizationRequest,
    client: Client,
    handle: str,
    browser_token: str,
    *,
    message: str | None = None,
    status: int = 200,
) -> Response:
    step = authorize.passkey_step(request_row, client)
    return _page(
        "passkey_step.html",
        status,
        browser_token=browser_token,
        client=client,
        redirect_uri=request_row.redirect_uri,
        handle=handle,
        passkey_options=step.options,
        refusal=step.refusal,
        can_add_passkey=step.can_add_passkey,
        message=message,
        error=bool(message),
    )


@blp.route("/v1/openidc/login/passkey", methods=["POST"])
@limiter.limit(_login_rate_limit, key_func=_login_rate_key)
@accepts(FORM)
def check_passkey():
    """Check a passkey answer (from the login page or the passkey step); on success continue as the
    e-mail code does. Counted against the same limits as the e-mail code."""
    _limit_network_in_database()
    browser_token, handle, request_row, client = _posted_request()
    second_step = request_row.candidate_user_id is not None and bool(request_row.amr)
    result = authorize.verify_login_passkey(request_row, client, request.form.get("credential", ""))
    if isinstance(result, LoginStep):
        commit_before_the_edge("a refused passkey still counts as an attempt")
        if second_step:
            return _passkey_step_page(request_row, client, handle, browser_token, message=result.message)
        # Answered like a wrong code (200), so the page's new ceremony is kept; a used-up request is 429.
        status = 429 if result.status == 429 else 200
        return _login_page(result, handle, browser_token, code_sent=False, status=status)
    return _step_page(handle, result, browser_token)


@blp.route("/v1/openidc/login/cancel", methods=["POST"])
@accepts(FORM)
def cancel_sign_in():
    """Give up a sign-in that cannot meet what the application requires: back to it with an error."""
    browser_token, handle, request_row, client = _posted_request()
    return _redirect(authorize.cancel_sign_in(request_row), code=303)


@blp.route(authorize.ACCOUNT_PAGE, methods=["GET"])
def account_page():
    """The signed-in user's account and passkeys: list, add, remove; not signed in, the sign-in."""
    browser_token, new_browser = _browser_token()
    signed_in = account.find_account(request.cookies.get(SESSION_COOKIE))
    if signed_in is None:
        return _redirect(url_for("oidc_pages.account_sign_in"), code=303)
    return _account_page(signed_in, browser_token, new_browser)


@blp.route(authorize.ACCOUNT_SIGN_IN_PAGE, methods=["GET"])
@limiter.limit(_login_rate_limit, key_func=_login_rate_key)
def account_sign_in():
    """Sign in to the account page without an application: the e-mail address, or a passkey. Each
    page begins a sign-in (a row, purged once expired), so page loads count against the sign-in limit."""
    browser_token, new_browser = _browser_token()
    if account.find_account(request.cookies.get(SESSION_COOKIE)) is not None:
        return _redirect(url_for("oidc_pages.account_page"), code=303)
    sign_in, handle = account_sign_in_service.start(authorize.browser_hash(browser_token))
    return _account_sign_in_page(account_sign_in_service.Step(sign_in), handle, browser_token, new_browser=new_browser)


def _account_sign_in_page(
    step: account_sign_in_service.Step,
    handle: str,
    browser_token: str,
    *,
    code_sent: bool = False,
    new_browser: bool = False,
    status: int | None = None,
) -> Response:
    """The account sign-in's page for `step`: the e-mail address (with passkeys), the code, or the
    accounts the proven address has."""
    context = {
        "handle": handle,
        "email": step.sign_in.email or "",
        "message": step.message,
        "error": step.error,
        "actions": _ACCOUNT_SIGN_IN_ACTIONS,
        "heading": "Sign in to your account",
    }
    if step.accounts:
        template = "account_choose.html"
        context["accounts"] = step.accounts
    elif code_sent:
        template = "login_code.html"
        context["ttl_minutes"] = current(OidcSettings).login_code_ttl // 60
    else:
        template = "login_email.html"
        context["passkey_options"] = account_sign_in_service.passkey_options(step.sign_in)
    return _page(template, status or step.status, browser_token=browser_token, new_browser=new_browser, **context)


def _posted_sign_in() -> tuple[str, str, AccountSignIn]:
    """The account sign-in a posted form continues, once its CSRF token is checked."""
    browser_token, _ = _browser_token()
    _check_csrf(browser_token)
    handle = request.form.get("request", "")
    return browser_token, handle, account_sign_in_service.require(handle, authorize.browser_hash(browser_token))


@blp.route(authorize.ACCOUNT_SIGN_IN_PAGE, methods=["POST"])
@limiter.limit(_login_rate_limit, key_func=_login_rate_key)
@accepts(FORM)
def account_send_code():
    """Mail the code for the address's accounts (whether or not it has any), and ask for it."""
    _limit_network_in_database()
    browser_token, handle, sign_in = _posted_sign_in()
    step = account_sign_in_service.send_code(sign_in, request.form.get("email", ""))
    return _account_sign_in_page(step, handle, browser_token, code_sent=not step.error)


@blp.route(authorize.ACCOUNT_SIGN_IN_PAGE + "/code", methods=["POST"])
@limiter.limit(_login_rate_limit, key_func=_login_rate_key)
@accepts(FORM)
def account_check_code():
    """Check the code; then on with the address's account (or the choice of one, when it has several)."""
    _limit_network_in_database()
    browser_token, handle, sign_in = _posted_sign_in()
    result = account_sign_in_service.check_code(sign_in, request.form.get("code", ""))
    if isinstance(result, account_sign_in_service.Continued):
        return _step_page(result.handle, result.outcome, browser_token)
    # A refused code is answered with the page again; the attempt it used up must stand.
    commit_before_the_edge("a refused login code still counts as an attempt")
    return _account_sign_in_page(
        result, handle, browser_token, code_sent=True, status=429 if result.status == 429 else 200
    )


@blp.route(authorize.ACCOUNT_SIGN_IN_PAGE + "/account", methods=["POST"])
@accepts(FORM)
def account_choose():
    """On with the account the person picked among those of their proven address."""
    browser_token, handle, sign_in = _posted_sign_in()
    result = account_sign_in_service.choose(sign_in, request.form.get("account", ""))
    if isinstance(result, account_sign_in_service.Continued):
        return _step_page(result.handle, result.outcome, browser_token)
    return _account_sign_in_page(result, handle, browser_token)


@blp.route(authorize.ACCOUNT_SIGN_IN_PAGE + "/passkey", methods=["POST"])
@limiter.limit(_login_rate_limit, key_func=_login_rate_key)
@accepts(FORM)
def account_check_passkey():
    """Check a passkey answer of the account sign-in page; on with its account when it may sign in alone."""
    _limit_network_in_database()
    browser_token, handle, sign_in = _posted_sign_in()
    result = account_sign_in_service.check_passkey(sign_in, request.form.get("credential", ""))
    if isinstance(result, account_sign_in_service.Continued):
        return _step_page(result.handle, result.outcome, browser_token)
    commit_before_the_edge("a refused passkey still counts as an attempt")
    return _account_sign_in_page(result, handle, browser_token, status=429 if result.status == 429 else 200)


def _account_page(
    signed_in: account.Account,
    browser_token: str,
    new_browser: bool = False,
    *,
    message: str | None = None,
    error: bool = False,
    status: int = 200,
) -> Response:
    return _page(
        "account.html",
        status,
        browser_token=browser_token,
        new_browser=new_browser,
        client=signed_in.client,
        email=signed_in.user.email_address,
        passkeys=account.passkeys_of(signed_in),
        passkey_options=account.start_registration(signed_in),
        account_pages=account.ACCOUNT_PAGES,
        message=message,
        error=error,
    )


@blp.route("/v1/openidc/account/passkeys", methods=["POST"])
@accepts(FORM)
def add_passkey():
    """Register the passkey the account page's browser created."""
    browser_token, _ = _browser_token()
    _check_csrf(browser_token)
    signed_in = account.require_account(request.cookies.get(SESSION_COOKIE))
    refusal = account.finish_registration(signed_in, request.form.get("credential", ""), request.form.get("name"))
    return _account_page(signed_in, browser_token, message=refusal or "Your passkey was added.", error=bool(refusal))


@blp.route("/v1/openidc/account/passkeys/remove", methods=["POST"])
@accepts(FORM)
def remove_passkey():
    """Remove one of the signed-in user's passkeys (not the last one where sign-in requires one)."""
    browser_token, _ = _browser_token()
    _check_csrf(browser_token)
    signed_in = account.require_account(request.cookies.get(SESSION_COOKIE))
    refusal = account.remove_passkey(signed_in, request.form.get("passkey_id", ""))
    return _account_page(signed_in, browser_token, message=refusal or "The passkey was removed.", error=bool(refusal))


@blp.route("/v1/openidc/consent", methods=["GET"])
def consent():
    """Ask the signed-in user to share the requested information with the client."""
    browser_token, _ = _browser_token()
    handle = request.args.get("request", "")
    request_row, client = authorize.require_request(handle, browser_token)
    authorize.require_signed_in(request_row)
    user = authorize.signed_in_user(request_row)
    items = authorize.consent_items(request_row, client)
    essential = RequestedClaims.from_json(request_row.claims).essential
    return _page(
        "consent.html",
        browser_token=browser_token,
        client=client,
        redirect_uri=request_row.redirect_uri,
        handle=handle,
        email=user.email_address if user else "",
        scopes=[
            (item, _item_description(item, essential, pairwise=subjects.is_pairwise(client)))
            for item in items
            if item in SCOPE_DESCRIPTIONS or item in SCOPE_CLAIMS or item.startswith(CLAIM_ITEM_PREFIX)
        ],
        # (claim name, profile field in words) of each mapped claim the client would receive.
        claims=sorted((claim, field.replace("_", " ")) for claim, field in (client.id_token_claims or {}).items())
        if APP_CLAIMS_SCOPE in items
        else [],
        shown_digest=authorize.shown_digest(request_row, client),
        device=request_row.device_authorization_id is not None,
    )


@blp.route("/v1/openidc/consent", methods=["POST"])
@accepts(FORM)
def decide():
    """Record allow or deny and return to the client."""
    browser_token, handle, request_row, client = _posted_request()
    location = authorize.decide_consent(
        request_row, client, request.form.get("decision", ""), request.form.get("shown")
    )
    return _redirect(location, code=303)


def _require_device_flow() -> None:
    if not current(OidcSettings).device_flow:
        raise AuthorizationPageError(
            "Connecting devices is not offered here.", status=404, code="not_found", detail="OIDC_DEVICE_FLOW is off."
        )


@blp.route(device.DEVICE_PAGE, methods=["GET"])
def device_page():
    """The device page (RFC 8628 `verification_uri`): asks for the code the device shows, prefilled
    from `verification_uri_complete`; the user still confirms it."""
    _require_device_flow()
    browser_token, new_browser = _browser_token()
    user_code = device.normalize_user_code(request.args.get("user_code"))
    return _page(
        "device.html",
        browser_token=browser_token,
        new_browser=new_browser,
        user_code=device.format_user_code(user_code) if user_code else "",
    )


@blp.route(device.DEVICE_PAGE, methods=["POST"])
@limiter.limit(_login_rate_limit, key_func=_login_rate_key)
@accepts(FORM)
def enter_user_code():
    """Take the code the device shows and continue with the sign-in and consent of the code flow."""
    _require_device_flow()
    browser_token, _ = _browser_token()
    _check_csrf(browser_token)
    try:
        outcome = authorize.start_device_sign_in(
            request.form.get("user_code"),
            remote_addr=request.remote_addr,
            browser_token=browser_token,
            session_token=request.cookies.get(SESSION_COOKIE),
        )
    except device.UserCodeRefused as refused:
        commit_before_the_edge("a refused user code still counts as an attempt")
        return _page(
            "device.html",
            refused.status,
            browser_token=browser_token,
            user_code=request.form.get("user_code", "")[:16],
            message=refused.message,
            error=True,
        )
    return _step_page(outcome.handle, outcome, browser_token)


@blp.route(device.DEVICE_DONE_PAGE, methods=["GET"])
def device_done():
    """The device page's last step: whether the device was connected."""
    _require_device_flow()
    browser_token, new_browser = _browser_token()
    # The client's keyed privacy reference, as on its privacy page: walking ids reveals no names.
    client_id = client_id_of_privacy_reference(request.args.get("client", ""))
    client = get_relying_party(str(client_id)) if client_id is not None else None
    error = request.args.get("error")
    message = {
        "access_denied": "You denied the device access. Nothing was shared with it.",
        "expired_token": "The code expired before you finished. Start again on your device.",
    }.get(error or "", "The sign-in could not finish. Start again on your device.")
    return _page(
        "device_done.html",
        browser_token=browser_token,
        new_browser=new_browser,
        client=client,
        approved=request.args.get("result") == "approved" and not error,
        message=message,
    )


@blp.route("/privacy/<reference>", methods=["GET"])
def privacy(reference: str):
    """The default privacy page of a client, where its sign-in pages link when it set no link of its own.

    The reference carries a keyed tag, so the names of all clients cannot be read by walking ids.
    """
    browser_token, _ = _browser_token()
    client_id = client_id_of_privacy_reference(reference)
    client = get_relying_party(str(client_id)) if client_id is not None else None
    if client is None:
        raise AuthorizationPageError(
            "There is no such application.", status=404, code="not_found", detail="No active client has this id."
        )
    return _page(
        "privacy.html", browser_token=browser_token, client=client, back_href=_back_target(request.args.get("back", ""))
    )


@blp.route("/v1/openidc/logout", methods=["GET", "POST"])
@accepts(FORM)
def logout():
    """RP-initiated logout: ends the single sign-on session, then returns to a registered URI.

    With an `id_token_hint` of the user signed in here the logout happens at once; otherwise
    the user confirms it on a page (so a third-party link cannot sign anyone out).
    """
    browser_token, new_browser = _browser_token()
    values = request.values.to_dict()
    plan = authorize.plan_logout(
        id_token_hint=values.get("id_token_hint"),
        client_id=values.get("client_id"),
        post_logout_redirect_uri=values.get("post_logout_redirect_uri"),
        state=values.get("state"),
        session_token=request.cookies.get(SESSION_COOKIE),
    )
    confirmed = request.method == "POST" and values.get("confirm") == "yes"
    if confirmed:
        _check_csrf(browser_token)
    if plan.needs_confirmation and not confirmed:
        return _page(
            "logout.html", browser_token=browser_token, new_browser=new_browser, redirect_uri=plan.target, values=values
        )
    authorize.end_session(request.cookies.get(SESSION_COOKIE))
    response = (
        _redirect(plan.target, code=303)
        if plan.target
        else _page("logged_out.html", browser_token=browser_token, new_browser=new_browser)
    )
    for path in (SESSION_COOKIE_PATH, COOKIE_PATH):
        _delete_cookie(response, SESSION_COOKIE, path)
    return response
