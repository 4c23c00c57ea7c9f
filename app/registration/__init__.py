"""Dynamic client registration (RFC 7591) and its management protocol (RFC 7592), on the client tree.

A master client obtains an initial access token (operator command line or
`POST /v1/openidc/register/initial_access_tokens`); registering with it creates a sub-client of that
master, managed afterwards with the registration access token the answer carries.
"""
