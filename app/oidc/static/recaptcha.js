// reCAPTCHA v3 for the sign-in form: obtain a token for the "login" action just before submitting.
document.addEventListener("DOMContentLoaded", function () {
  var form = document.getElementById("email-form");
  if (!form || !form.dataset.recaptchaKey) { return; }
  form.addEventListener("submit", function (event) {
    var field = form.querySelector("input[name='g-recaptcha-response']");
    if (field.value) { return; }
    event.preventDefault();
    window.grecaptcha.ready(function () {
      window.grecaptcha.execute(form.dataset.recaptchaKey, { action: form.dataset.recaptchaAction })
        .then(function (token) { field.value = token; form.submit(); });
    });
  });
});
