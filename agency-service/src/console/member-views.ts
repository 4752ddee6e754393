/**
 * Agency settings → Members (the agency's owners only): the list of members
 * with their roles, sub-accounts and status, and the confirmations of
 * removing a membership and of disabling an account.
 */
import type { AgencyMember } from '../users/members.js'
import type { KeyArea } from './access.js'
import type { SafeHtml } from './html.js'
import { html } from './html.js'
import { formTokenInput } from './form-token.js'
import { csrfInput, page } from './layout.js'
import type { ConsolePaths } from './paths.js'
import type { ConsoleSession } from './sessions.js'
import { crumbs, settingsTabs, tenantName } from './key-views.js'

const roleNames = { owner: 'Owner', admin: 'Admin', member: 'Member' } as const

/** What the list says after a redirect; a closed vocabulary read from the query string. */
export const memberNotices = ['removed', 'sub-account-removed', 'disabled'] as const
export type MemberNotice = (typeof memberNotices)[number]

/** What the list says after a change, naming whom (`subject`: an email, or "email from sub-account"). */
function noticeText(notice: MemberNotice, subject: string | null): string {
  switch (notice) {
    case 'removed':
      return `${subject ?? 'The member'} was removed from the agency, with their memberships of its sub-accounts. Their next page shows only what they still belong to.`
    case 'sub-account-removed':
      return `Removed ${subject ?? 'the sub-account membership'}.`
    case 'disabled':
      return `The account of ${subject ?? 'the member'} was disabled. Its sessions have ended and it can no longer sign in.`
  }
}

/** Where a member's actions live: <members>/<user id>/… */
export function memberPath(membersPath: string, member: { id: string }, action: string): string {
  return `${membersPath}/${member.id}/${action}`
}

function section(membersPath: string): { label: string; href: string } {
  return { label: 'Members', href: membersPath }
}

function subAccountsCell(membersPath: string, member: AgencyMember, self: boolean): SafeHtml {
  if (member.subAccounts.length === 0) return html`<span>—</span>`
  return html`<ul class="plain-list">${member.subAccounts.map(
    (sub) =>
      html`<li>${sub.name}${
        !self &&
        html` <a href="${memberPath(membersPath, member, `sub-accounts/${sub.id}/remove`)}" aria-label="Remove ${member.email} from ${sub.name}">Remove</a>`
      }</li>`,
  )}</ul>`
}

function actionsCell(membersPath: string, member: AgencyMember, self: boolean): SafeHtml {
  if (self) return html`<span class="hint">You</span>`
  const disable = member.disabled
    ? undefined
    : member.inOtherAgencies
      ? html`<span class="hint">Also in another agency: it can be removed from this one, not disabled</span>`
      : html`<a href="${memberPath(membersPath, member, 'disable')}" aria-label="Disable the account of ${member.email}">Disable account</a>`
  return html`<a href="${memberPath(membersPath, member, 'remove')}" aria-label="Remove ${member.email} from the agency">Remove from agency</a>${disable}`
}

function memberRow(membersPath: string, session: ConsoleSession, member: AgencyMember): SafeHtml {
  const self = member.id === session.userId
  return html`<tr>
  <th scope="row" data-label="Email">${member.email}</th>
  <td data-label="Role">${roleNames[member.role]}</td>
  <td data-label="Sub-accounts">${subAccountsCell(membersPath, member, self)}</td>
  <td data-label="Status">${member.disabled ? html`<span class="status status-revoked">Disabled</span>` : html`<span class="status status-active">Active</span>`}</td>
  <td data-label="Actions" class="actions-cell">${actionsCell(membersPath, member, self)}</td>
</tr>`
}

export interface MembersPageOptions {
  paths: ConsolePaths
  session: ConsoleSession
  area: KeyArea
  membersPath: string
  members: readonly AgencyMember[]
  notice?: { notice: MemberNotice; subject: string | null } | undefined
}

export function membersPage(options: MembersPageOptions): string {
  const { paths, session, area, membersPath, members } = options
  return page({
    paths,
    title: `Members · ${area.agency.name}`,
    session,
    crumbs: crumbs(paths, area, undefined, section(membersPath)),
    body: html`<h1>Members</h1>
<p class="lede">The people who can sign in to ${tenantName(area)}’s settings. Owners and admins manage every key of the agency and its sub-accounts; a member sees the agency’s keys and manages those of the sub-accounts they belong to.</p>
${settingsTabs(area, 'members')}
${options.notice !== undefined && html`<div class="notice" role="status"><p>${noticeText(options.notice.notice, options.notice.subject)}</p></div>`}
<div>
<table class="stacking">
  <caption id="members-caption" class="visually-hidden">Members of ${area.agency.name}</caption>
  <thead><tr><th scope="col">Email</th><th scope="col">Role</th><th scope="col">Sub-accounts</th><th scope="col">Status</th><th scope="col">Actions</th></tr></thead>
  <tbody>${members.map((member) => memberRow(membersPath, session, member))}</tbody>
</table>
</div>
<p class="hint">Removing a membership takes effect on the member’s next page. Disabling ends the account’s sessions at once and refuses its sign-in; it is offered only for accounts that belong to this agency alone, as the account is shared with every agency it belongs to. New members are invited from <a href="${area.keysPath.replace(/\/keys$/, '/invitations/new')}">Invite a member</a> (or added by an operator, <code>ctl user create</code>).</p>`,
  })
}

/** The action a confirmation is for: removing the agency membership, one sub-account membership, or disabling the account. */
export type MemberAction = { kind: 'remove' } | { kind: 'remove-sub-account'; subAccount: { id: string; name: string } } | { kind: 'disable' }

function confirmText(area: KeyArea, member: AgencyMember, action: MemberAction): { title: string; explain: SafeHtml; button: string; path: string } {
  switch (action.kind) {
    case 'remove':
      return {
        title: 'Remove from the agency?',
        explain: html`<strong>${member.email}</strong> (${roleNames[member.role]}) loses access to ${tenantName(area)} and every one of its sub-accounts${
          member.subAccounts.length > 0
            ? html`, and their memberships of ${member.subAccounts.map((sub, i) => html`${i > 0 ? ', ' : ''}${sub.name}`)} are removed`
            : ''
        }. The account itself stays, with any other agency it belongs to.`,
        button: 'Remove from agency',
        path: 'remove',
      }
    case 'remove-sub-account':
      return {
        title: 'Remove from the sub-account?',
        explain: html`<strong>${member.email}</strong> loses access to the keys and the audit trail of <strong>${action.subAccount.name}</strong>, unless they are an owner or admin of the agency.`,
        button: 'Remove from sub-account',
        path: `sub-accounts/${action.subAccount.id}/remove`,
      }
    case 'disable':
      return {
        title: 'Disable the account?',
        explain: html`<strong>${member.email}</strong> is signed out everywhere at once and can no longer sign in. The account stays listed here as disabled. Only an operator can give the person a new account.`,
        button: 'Disable account',
        path: 'disable',
      }
  }
}

export function memberConfirmPage(
  paths: ConsolePaths,
  session: ConsoleSession,
  area: KeyArea,
  membersPath: string,
  member: AgencyMember,
  action: MemberAction,
): string {
  const text = confirmText(area, member, action)
  return page({
    paths,
    title: text.title,
    session,
    crumbs: crumbs(paths, area, text.button, section(membersPath)),
    body: html`<h1>${text.title}</h1>
<div class="panel">
  <p>${text.explain}</p>
  <form method="post" action="${memberPath(membersPath, member, text.path)}">
    ${csrfInput(session.csrfToken)}${formTokenInput()}
    <div class="actions"><button type="submit" class="button-danger">${text.button}</button><a href="${membersPath}">Cancel</a></div>
  </form>
</div>`,
  })
}
