// flowd.js: progressive enhancements only; every page works without it.
// Buttons with data-copy copy the text of the element they name.
document.addEventListener("click", function (event) {
  var button = event.target.closest("[data-copy]");
  if (!button || !navigator.clipboard) return;
  var source = document.getElementById(button.getAttribute("data-copy"));
  if (!source) return;
  navigator.clipboard.writeText(source.textContent.trim()).then(function () {
    var label = button.textContent;
    button.textContent = button.getAttribute("data-copied") || "Copied";
    setTimeout(function () { button.textContent = label; }, 1500);
  });
});
