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
import type { AuditKeyFacts } from './audit-keys.js'
import { shortHint } from './key-list.js'
import { relativeTime, spanText } from './relative-time.js'

const typeNames: Record<AuditEventType, string> = {
  'key.created': 'Key created',
  'key.rolled': 'Key rolled',
  'key.revoked': 'Key revoked',
  'key.deleted': 'Key deleted',
  'key.updated': 'Key settings changed',
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
  'invitation.created': 'Member invited',
  'invitation.accepted': 'Invitation accepted',
}

const changedFieldNames: Readonly<Record<string, string>> = {
  name: 'name',
  permissions: 'permissions',
  allowedCidrs: 'addresses',
  rateLimit: 'rate limit',
}

/** The settings a key.updated's before/after (audit_events.changes, migration 015) shows changed, by the key's columns. */
const columnFields: Readonly<Record<string, string>> = {
  name: 'name',
  permissions: 'permissions',
  allowed_cidrs: 'allowedCidrs',
  rate_limit_rate: 'rateLimit',
  rate_limit_burst: 'rateLimit',
}

/** The changed settings: as declared with the event (migration 022), else read from its before/after. */
function changedFieldsOf(event: Pick<AuditRecord, 'changedFields' | 'changes'>): string[] {
  if (event.changedFields !== null && event.changedFields.length > 0) return event.changedFields
  const fields = Object.keys(event.changes ?? {}).flatMap((column) => columnFields[column] ?? [])
  return [...new Set(fields)]
}

/**
 * The event's label: a key.updated names the settings that changed ("Key
 * settings changed" for an event that does not say which).
 */
export function eventLabel(event: Pick<AuditRecord, 'type' | 'changedFields' | 'changes'>): string {
  const fields = event.type === 'key.updated' ? changedFieldsOf(event) : []
  if (fields.length === 0) return typeNames[event.type]
  const names = fields.map((field) => changedFieldNames[field] ?? field)
  return `Key ${names.join(' and ')} changed`
}

/**
 * What changed, from what the event and the key hold today: a roll's new key
 * and the old key's end. The trail's before/after (audit_events.changes, from
 * the audit branch) belongs here too, for every change.
 */
function changeDetail(event: AuditRecord, facts: AuditKeyFacts | undefined, area: KeyArea, paths: ConsolePaths): SafeHtml | false {
  if (event.type !== 'key.rolled' || facts === undefined) return false
  const successor =
    facts.successor === null
      ? html`by a key since deleted`
      : html`by <a href="${keyHref(paths, area, facts.subAccountId, facts.successor.id)}">${shortHint(facts.successor.hint)}</a>`
  const grace =
    facts.expiresAt === null
      ? ''
      : html`; the old key ${new Date(facts.expiresAt) <= new Date(event.at) ? 'ended at once' : html`worked for ${spanText(new Date(facts.expiresAt).getTime() - new Date(event.at).getTime())} more, until ${formatTime(facts.expiresAt, '—')}`}`
  return html`<span class="audit-change">Replaced ${successor}${grace}</span>`
}

/** A key's row in its list (revoked and replaced keys included). */
function keyHref(paths: ConsolePaths, area: KeyArea, subAccountId: string | null, keyId: string): string {
  const list = subAccountId === null ? paths.agencyKeys(area.agency.id) : paths.subAccountKeys(subAccountId)
  return `${list}?show=all#key-${keyId}`
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

function keyCell(event: AuditRecord, names: AuditNames, facts: AuditKeyFacts | undefined, area: KeyArea, paths: ConsolePaths): SafeHtml | false {
  if (event.keyId === null) return false
  const name = event.keyName ?? names.keys.get(event.keyId) ?? ''
  const hint = event.keyHint ?? facts?.hint ?? null
  const label = hint === null ? name : `${name} (${shortHint(hint)})`
  // Linked to its row in the key list while the key exists; the hint matches the list's.
  const named =
    facts === undefined
      ? html`<strong>${name}</strong> <span class="hint">(deleted)</span>`
      : html`<a href="${keyHref(paths, area, facts.subAccountId, event.keyId)}" aria-label="Key ${label}"><strong>${name}</strong></a>`
  return html`${named}${hint !== null && html` <span class="hint-code key-hint">${hint}</span>`}`
}

function subjectCell(event: AuditRecord, names: AuditNames, facts: AuditKeyFacts | undefined, area: KeyArea, paths: ConsolePaths): SafeHtml {
  const key = keyCell(event, names, facts, area, paths)
  // The user as they were at the time (their email and role then), whether or not they still belong to the agency.
  const user =
    event.user !== null &&
    html`<span class="hint">user</span> <strong>${event.user.email}</strong>${event.user.role !== null && html` <span class="hint">(${event.user.role})</span>`}`
  const invitee =
    event.invitee !== null &&
    html`<span class="hint">invited</span> <strong>${event.invitee.email}</strong>${event.invitee.role !== null && html` <span class="hint">(${event.invitee.role})</span>`}`
  const sub =
    area.subAccount === null &&
    event.subAccountId !== null &&
    html`${key || user || invitee ? html`<br>` : ''}<span class="hint">sub-account</span> ${names.subAccounts.get(event.subAccountId) ?? ''} <code>${event.subAccountId}</code>`
  return html`${key}${user}${invitee}${sub}`
}

export interface AuditPageOptions {
  paths: ConsolePaths
  session: ConsoleSession
  area: KeyArea
  events: readonly AuditRecord[]
  names: AuditNames
  /** What the keys the events name are now (hint, successor, end). */
  keyFacts: ReadonlyMap<string, AuditKeyFacts>
  type: AuditEventType | undefined
  /** The clock of relative times. */
  now: Date
  /** The link to the next (older) page, if any. */
  olderHref: string | undefined
}

export function auditPage(options: AuditPageOptions): string {
  const { paths, session, area, events, names, type } = options
  const whose = area.subAccount === null ? html`${tenantName(area)} and its sub-accounts` : tenantName(area)
  const facts = (event: AuditRecord): AuditKeyFacts | undefined => (event.keyId === null ? undefined : options.keyFacts.get(event.keyId))
  const rows = events.map(
    (event) => html`<tr>
  <td data-label="When">${relativeTime(event.at, options.now, '—')}</td>
  <td data-label="Event"><span class="event-type">${eventLabel(event)}</span>${
    event.refusals !== null && html` <span class="refusals">(${String(event.refusals)} in that minute)</span>`
  } <code class="hint">${event.type}</code>${changeDetail(event, facts(event), area, paths)}${keyChangeLines(event)}</td>
  <td data-label="Key, user or sub-account">${subjectCell(event, names, facts(event), area, paths)}</td>
  <td data-label="Who">${actorCell(event, names)}</td>
  <td data-label="Client address">${event.clientAddress === null ? html`<span>—</span>` : html`<code>${event.clientAddress}</code>`}</td>
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
    : html`<div>
<table class="stacking">
  <caption id="audit-caption" class="visually-hidden">Audit events, newest first</caption>
  <thead><tr><th scope="col">When</th><th scope="col">Event</th><th scope="col">Key, user or sub-account</th><th scope="col">Who</th><th scope="col">Client address</th></tr></thead>
  <tbody>${rows}</tbody>
</table>
</div>`
}
${options.olderHref !== undefined && html`<p class="actions"><a class="button button-secondary" href="${options.olderHref}">Older events</a></p>`}`,
  })
}
