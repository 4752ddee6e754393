/** The audit trail page of agency settings (the agency's events and its sub-accounts') and of sub-account settings (its own). */
import type { AuditEventType, AuditNames, AuditRecord } from '../audit/audit-log.js'
import { auditEventTypes } from '../audit/audit-log.js'
import { keyChangeLines } from './audit-changes.js'
import type { KeyArea } from './access.js'
import type { SafeHtml } from './html.js'
import { html } from './html.js'
import { page } from './layout.js'
import type { ConsolePaths } from './paths.js'
import type { ConsoleSession } from './sessions.js'
import { crumbs, formatTime, settingsTabs, tenantName } from './key-views.js'

const typeNames: Record<AuditEventType, string> = {
  'key.created': 'Key created',
  'key.rolled': 'Key rolled',
  'key.revoked': 'Key revoked',
  'key.deleted': 'Key deleted',
  'key.updated': 'Key changed',
  'key.leaked': 'Key reported leaked',
  'sub-account.created': 'Sub-account created',
  'sub-account.updated': 'Default key rate limit changed',
  'sub-account.deleted': 'Sub-account deleted',
  'user.created': 'User created',
  'user.updated': 'User changed',
  'user.disabled': 'User disabled',
  'user.password-changed': 'Password changed',
  'user.signed-in': 'Signed in',
  'user.sign-in-refused': 'Sign-in refused',
  'membership.added': 'Membership added',
  'membership.removed': 'Membership removed',
}

function actorCell(event: AuditRecord, names: AuditNames): SafeHtml {
  switch (event.actor.kind) {
    case 'user':
      return html`Console user <strong>${names.users.get(event.actor.id) ?? event.actor.id}</strong>`
    case 'key':
      return html`API key <strong>${names.keys.get(event.actor.id) ?? ''}</strong> <code>${event.actor.id}</code>`
    case 'cli':
      return html`Operator <code>${event.actor.id}</code>`
    case 'unattributed':
      return html`Unattributed, by database login <code>${event.actor.id}</code>`
  }
}

function subjectCell(event: AuditRecord, names: AuditNames, area: KeyArea): SafeHtml {
  const key = event.keyId !== null && html`<strong>${event.keyName ?? names.keys.get(event.keyId) ?? ''}</strong> <code>${event.keyId}</code>`
  // The user as they were at the time (their email and role then), whether or not they still belong to the agency.
  const user =
    event.user !== null &&
    html`<span class="hint">user</span> <strong>${event.user.email}</strong>${event.user.role !== null && html` <span class="hint">(${event.user.role})</span>`}`
  const sub =
    area.subAccount === null &&
    event.subAccountId !== null &&
    html`${key || user ? html`<br>` : ''}<span class="hint">sub-account</span> ${names.subAccounts.get(event.subAccountId) ?? ''} <code>${event.subAccountId}</code>`
  return html`${key}${user}${sub}`
}

export interface AuditPageOptions {
  paths: ConsolePaths
  session: ConsoleSession
  area: KeyArea
  events: readonly AuditRecord[]
  names: AuditNames
  type: AuditEventType | undefined
  /** The link to the next (older) page, if any. */
  olderHref: string | undefined
}

export function auditPage(options: AuditPageOptions): string {
  const { paths, session, area, events, names, type } = options
  const whose = area.subAccount === null ? html`${tenantName(area)} and its sub-accounts` : tenantName(area)
  const rows = events.map(
    (event) => html`<tr>
  <td>${formatTime(event.at, '—')}</td>
  <td><span class="event-type">${typeNames[event.type]}</span>${
    event.refusals !== null && html` <span class="refusals">(${String(event.refusals)} in that minute)</span>`
  } <code class="hint">${event.type}</code>${keyChangeLines(event)}</td>
  <td>${subjectCell(event, names, area)}</td>
  <td>${actorCell(event, names)}</td>
  <td>${event.clientAddress === null ? html`<span>—</span>` : html`<code>${event.clientAddress}</code>`}</td>
</tr>`,
  )
  return page({
    paths,
    title: `Audit trail · ${area.subAccount?.name ?? area.agency.name}`,
    session,
    crumbs: crumbs(paths, area, undefined, { label: 'Audit trail', href: area.auditPath }),
    body: html`<h1>Audit trail</h1>
<p class="lede">Every key created, rolled, changed, revoked or deleted${area.subAccount === null ? ', every sub-account created or deleted,' : ''} and every user created, disabled, removed, signing in or changing a password, for ${whose}, newest first, with who did it and from where. The trail cannot be changed or deleted.</p>
${settingsTabs(area, 'audit')}
<form method="get" action="${area.auditPath}" class="inline-form filter-form">
  <div class="field">
    <label for="audit-type">Event</label>
    <select id="audit-type" name="type">
      <option value="">All events</option>
      ${auditEventTypes.map((value) => html`<option value="${value}"${value === type ? ' selected' : ''}>${typeNames[value]}</option>`)}
    </select>
  </div>
  <button type="submit" class="button-secondary">Show</button>
</form>
${
  events.length === 0
    ? html`<p>No events${type === undefined ? '' : ' of this kind'} yet.</p>`
    : html`<div class="table-wrap" role="region" aria-labelledby="audit-caption" tabindex="0">
<table>
  <caption id="audit-caption" class="visually-hidden">Audit events, newest first</caption>
  <thead><tr><th scope="col">When</th><th scope="col">Event</th><th scope="col">Key, user or sub-account</th><th scope="col">Who</th><th scope="col">Client address</th></tr></thead>
  <tbody>${rows}</tbody>
</table>
</div>`
}
${options.olderHref !== undefined && html`<p class="actions"><a class="button button-secondary" href="${options.olderHref}">Older events</a></p>`}`,
  })
}
