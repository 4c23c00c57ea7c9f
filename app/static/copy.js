// Copy buttons: <button data-copy="ELEMENT-ID" hidden>; shown only where the clipboard API works.
document.querySelectorAll("button[data-copy]").forEach(function (button) {
  var target = document.getElementById(button.dataset.copy);
  if (!target || !navigator.clipboard) { return; }
  button.hidden = false;
  button.addEventListener("click", function () {
    navigator.clipboard.writeText(target.textContent.trim()).then(function () {
      button.textContent = "Copied";
    }, function () {
      button.textContent = "Select and copy";
    });
  });
});
