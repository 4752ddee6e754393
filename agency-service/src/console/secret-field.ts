/**
 * A secret shown once (a new key, an invitation link, a webhook signing
 * secret): a read-only field to select by hand, and a Copy button that the
 * console's script reveals and wires, saying in a live region whether it
 * copied.
 */
import type { HtmlValue, SafeHtml } from './html.js'
import { html } from './html.js'

export function secretField(id: string, label: HtmlValue, secret: string): SafeHtml {
  return html`<div class="field">
  <label for="${id}">${label}</label>
  <div class="key-box">
    <input type="text" id="${id}" readonly value="${secret}" spellcheck="false" autocomplete="off" aria-describedby="copy-status">
    <button type="button" class="button-secondary" data-copy-target="${id}" data-copy-status="copy-status" hidden>Copy</button>
  </div>
  <p id="copy-status" class="hint" role="status" aria-live="polite"></p>
</div>`
}
