/*
 * The console's one script, progressive enhancement only: every page works
 * without it. It reveals and wires the copy button beside a new key, and says
 * what happened in a live region. Served as a file (the Content-Security-Policy
 * allows no inline script).
 */
/* global document, navigator */
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
      status.textContent = 'The key is selected: press Ctrl+C (or Command+C) to copy it.'
    }
  })
}
