// A form whose refusal (400) comes back as the same fragment with the reason in it: show it, as HTMX would not
// swap an error response by itself. Targets opt in with data-refusals-inline.
document.addEventListener("htmx:beforeSwap", (event) => {
  const target = event.detail.target;
  if (event.detail.xhr.status === 400 && target && target.closest("[data-refusals-inline]")) {
    event.detail.shouldSwap = true;
    event.detail.isError = false;
  }
});
