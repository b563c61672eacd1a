// A form with data-confirm asks before it is sent (the question is in the page's language; inline handlers are
// refused by the Content-Security-Policy).
document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("form[data-confirm]").forEach((form) => {
    form.addEventListener("submit", (event) => {
      if (!window.confirm(form.dataset.confirm)) event.preventDefault();
    });
  });
});
