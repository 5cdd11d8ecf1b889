// Behaviour the pages declare in data attributes, so that no page needs an inline script or
// event handler (the Content-Security-Policy allows scripts from this server only).
//   <form data-confirm="Question?">   asks before submitting
//   <select data-autosubmit>          submits its form when changed
"use strict";

document.addEventListener("submit", (event) => {
  const question = event.target.dataset && event.target.dataset.confirm;
  if (question && !window.confirm(question)) event.preventDefault();
});

document.addEventListener("change", (event) => {
  if (event.target.matches && event.target.matches("[data-autosubmit]") && event.target.form) {
    event.target.form.submit();
  }
});
