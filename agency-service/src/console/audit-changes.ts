/**
 * What a key change recorded in the trail changed, in words: the
 * `changes` (before and after of each column, written by the database
 * triggers) of a `key.updated` event. A column the console has no words for
 * is named as changed, never left out.
 */
import type { AuditRecord } from '../audit/audit-log.js'
import type { SafeHtml } from './html.js'
import { html } from './html.js'

function permissionsText(value: unknown): SafeHtml {
  if (!Array.isArray(value)) return html`unrestricted`
  if (value.length === 0) return html`no permission`
  return html`${value.map((name, index) => html`${index > 0 ? ', ' : ''}<code>${String(name)}</code>`)}`
}

function addressesText(value: unknown): SafeHtml {
  if (!Array.isArray(value) || value.length === 0) return html`any address`
  return html`${value.map((cidr, index) => html`${index > 0 ? ', ' : ''}<code>${String(cidr)}</code>`)}`
}

function plainText(value: unknown): SafeHtml {
  return value === null || value === undefined ? html`none` : html`${typeof value === 'string' ? value : JSON.stringify(value)}`
}

const columnWords: Record<string, { label: string; text: (value: unknown) => SafeHtml }> = {
  permissions: { label: 'Permissions', text: permissionsText },
  allowed_cidrs: { label: 'Allowed addresses', text: addressesText },
  name: { label: 'Name', text: plainText },
  rate_limit_rate: { label: 'Requests per second', text: plainText },
  rate_limit_burst: { label: 'Burst', text: plainText },
}

/** The lines under a `key.updated` event: one per changed column, before → after; nothing for other events. */
export function keyChangeLines(event: AuditRecord): SafeHtml | false {
  if (event.type !== 'key.updated' || event.changes === null) return false
  return html`${Object.entries(event.changes).map(([column, { before, after }]) => {
    const words = columnWords[column]
    return words === undefined
      ? html`<br><span class="hint">${column} changed</span>`
      : html`<br><span class="hint">${words.label}: ${words.text(before)} → ${words.text(after)}</span>`
  })}`
}
