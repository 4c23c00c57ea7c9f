// Passkeys on the hosted pages. A form carries the ceremony's options (JSON, from the server) in
// data-passkey-get (sign in) or data-passkey-create (registration); the browser's answer is posted
// with that form as JSON in its "credential" field. On the login page the browser may also offer
// passkeys in the e-mail field's autofill (conditional mediation) where it supports that.
(function () {
  "use strict";

  function toBytes(text) {
    var base64 = text.replace(/-/g, "+").replace(/_/g, "/");
    var binary = atob(base64 + "===".slice((base64.length + 3) % 4));
    var bytes = new Uint8Array(binary.length);
    for (var i = 0; i < binary.length; i += 1) { bytes[i] = binary.charCodeAt(i); }
    return bytes.buffer;
  }

  function toText(buffer) {
    var bytes = new Uint8Array(buffer);
    var binary = "";
    for (var i = 0; i < bytes.length; i += 1) { binary += String.fromCharCode(bytes[i]); }
    return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }

  function withIds(list) {
    return (list || []).map(function (item) {
      var copy = Object.assign({}, item);
      copy.id = toBytes(item.id);
      return copy;
    });
  }

  function requestOptions(json) {
    var options = Object.assign({}, json);
    options.challenge = toBytes(json.challenge);
    options.allowCredentials = withIds(json.allowCredentials);
    return options;
  }

  function creationOptions(json) {
    var options = Object.assign({}, json);
    options.challenge = toBytes(json.challenge);
    options.user = Object.assign({}, json.user, { id: toBytes(json.user.id) });
    options.excludeCredentials = withIds(json.excludeCredentials);
    return options;
  }

  function answer(credential) {
    var response = credential.response;
    var body = {
      id: credential.id,
      rawId: toText(credential.rawId),
      type: credential.type,
      clientExtensionResults: credential.getClientExtensionResults ? credential.getClientExtensionResults() : {},
      authenticatorAttachment: credential.authenticatorAttachment || undefined,
      response: { clientDataJSON: toText(response.clientDataJSON) }
    };
    if (response.attestationObject) {
      body.response.attestationObject = toText(response.attestationObject);
      body.response.transports = response.getTransports ? response.getTransports() : [];
    } else {
      body.response.authenticatorData = toText(response.authenticatorData);
      body.response.signature = toText(response.signature);
      if (response.userHandle) { body.response.userHandle = toText(response.userHandle); }
    }
    return JSON.stringify(body);
  }

  function submit(form, credential) {
    form.querySelector("input[name='credential']").value = answer(credential);
    form.submit();
  }

  function unsupported() {
    var note = document.getElementById("passkey-unsupported");
    if (note) { note.hidden = false; }
  }

  // Says why a ceremony the user started ended without a passkey, instead of nothing at all.
  function failed(error) {
    var note = document.getElementById("passkey-failed");
    var name = error && error.name;
    if (!note) { return; }
    if (name === "SecurityError") {
      note.textContent = "This browser refuses passkeys at " + location.host + ". Passkeys need the service's " +
        "domain name (such as localhost), not an IP address.";
    } else if (name === "InvalidStateError") {
      note.textContent = "This device already holds a passkey for this account.";
    } else if (name === "NotAllowedError") {
      note.textContent = "No passkey was used. Try again, or sign in another way.";
    } else {
      note.textContent = "The passkey could not be used" + (error && error.message ? ": " + error.message : ".");
    }
    note.hidden = false;
  }

  function signIn(form) {
    var options = JSON.parse(form.dataset.passkeyGet);
    var button = form.querySelector("button");
    var pending = null;
    button.hidden = false;
    button.addEventListener("click", function () {
      if (pending) { pending.abort(); }
      button.disabled = true;
      navigator.credentials.get({ publicKey: requestOptions(options) })
        .then(function (credential) { if (credential) { submit(form, credential); } })
        .catch(function (error) { button.disabled = false; failed(error); });
    });
    if (!form.dataset.conditional || !PublicKeyCredential.isConditionalMediationAvailable) { return; }
    PublicKeyCredential.isConditionalMediationAvailable().then(function (available) {
      if (!available) { return; }
      pending = new AbortController();
      navigator.credentials.get({ mediation: "conditional", signal: pending.signal, publicKey: requestOptions(options) })
        .then(function (credential) { if (credential) { submit(form, credential); } })
        .catch(function () { return null; });
    });
  }

  function register(form) {
    var options = JSON.parse(form.dataset.passkeyCreate);
    var button = form.querySelector("button");
    button.hidden = false;
    button.addEventListener("click", function () {
      button.disabled = true;
      navigator.credentials.create({ publicKey: creationOptions(options) })
        .then(function (credential) { if (credential) { submit(form, credential); } })
        .catch(function (error) { button.disabled = false; failed(error); });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var forms = document.querySelectorAll("form[data-passkey-get], form[data-passkey-create]");
    if (!forms.length) { return; }
    if (!window.PublicKeyCredential || !navigator.credentials) { unsupported(); return; }
    forms.forEach(function (form) {
      if (form.dataset.passkeyGet) { signIn(form); } else { register(form); }
    });
  });
}());
