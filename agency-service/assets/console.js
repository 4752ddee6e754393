/*
 * The console's one script, progressive enhancement only: every page works
 * without it (the server refuses what the script would have prevented).
 * Served as a file (the Content-Security-Policy allows no inline script).
 *
 * - The copy button beside a new key or invitation link, saying what happened
 *   in a live region.
 * - A form that changes something is sent once: its buttons are disabled on
 *   the first submit and a second submit is ignored (the server answers a
 *   repeated form token with the first result all the same).
 * - The expiry date field is shown only while Expires says "On the date
 *   given" (hidden, it is disabled, so it is not sent).
 * - An error summary (or a warning that asks for confirmation) takes focus.
 */
/* global document, navigator, window */
'use strict'

for (const button of document.querySelectorAll('button[data-copy-target]')) {
  const input = document.getElementById(button.getAttribute('data-copy-target'))
  const status = document.getElementById(button.getAttribute('data-copy-status'))
  if (!input || !status) continue
  button.hidden = false
  button.addEventListener('click', async () => {
    input.focus()
    input.select()
    try {
      await navigator.clipboard.writeText(input.value)
      status.textContent = 'Copied to the clipboard.'
    } catch {
      status.textContent = 'Selected: press Ctrl+C (or Command+C) to copy it.'
    }
  })
}

for (const form of document.querySelectorAll('form')) {
  if (!form.querySelector('input[name="formToken"]')) continue
  form.addEventListener('submit', (event) => {
    if (form.dataset.submitted === 'true') {
      event.preventDefault()
      return
    }
    form.dataset.submitted = 'true'
    // After this task: a button disabled now would leave its name and value out of what is sent.
    window.setTimeout(() => {
      for (const button of form.querySelectorAll('button')) button.disabled = true
    }, 0)
  })
}

// A page restored from the back-forward cache gets its forms back in working order.
window.addEventListener('pageshow', (event) => {
  if (!event.persisted) return
  for (const form of document.querySelectorAll('form[data-submitted]')) {
    delete form.dataset.submitted
    for (const button of form.querySelectorAll('button')) button.disabled = false
  }
})

for (const select of document.querySelectorAll('select[data-shows-when-date]')) {
  const field = document.getElementById(select.getAttribute('data-shows-when-date'))
  const input = field && field.querySelector('input')
  if (!field || !input) continue
  const apply = () => {
    const applies = select.value === 'date'
    field.hidden = !applies
    input.disabled = !applies
  }
  // A date the server refused (typed while Expires said otherwise) stays in view until Expires changes.
  if (select.value === 'date' || input.value === '') apply()
  select.addEventListener('change', apply)
}

const summary = document.querySelector('[data-error-summary]')
if (summary && document.activeElement !== summary) summary.focus()
