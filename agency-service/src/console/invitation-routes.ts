/**
 * Inviting members (issue 34): an agency's owners and admins invite a person
 * by email, as an admin or as a member (of one sub-account, or of none yet);
 * a page shows the invitation link once (its token is stored only as a
 * hash) and says until when it works. The link opens a page without a
 * session where the person sets a password, which creates their account and
 * membership; then they sign in. Audited: invitation.created,
 * user.created, invitation.accepted.
 *
 * The form is sent once (form-once.ts), like creating a key: a repeated
 * submission (a double click) makes no second invitation and is sent to the
 * same page with the same link, which is sealed under the form's token until
 * its first view (one-time-display.ts); a reload or Back says it cannot be
 * shown again.
 *
 *   GET  …/agencies/:id/invitations/new                 the form;  POST: invite, then to the link's page
 *   GET  …/agencies/:id/invitations/:invitationId/created   the link, once (then 410)
 *   GET  …/invitations/:token                           set a password;  POST: accept, then to sign-in
 */
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { Pool } from '@scoped/shared/db'
import { ApiError, isApiError } from '@scoped/shared/errors'
import { uuidOrNotFound } from '@scoped/shared/validation'
import { userActor } from '../audit/actor.js'
import type { InvitedRole } from '../users/invitations.js'
import { InvitationStore } from '../users/invitations.js'
import type { KeyArea } from './access.js'
import { agencyKeyArea, consoleHome, requireManage } from './access.js'
import { sessionOf } from './authenticate.js'
import { cookieOptions, REVEAL_COOKIE } from './cookies.js'
import { FORM_BODY_LIMIT, formField, isSameOrigin } from './csrf.js'
import { sendPage } from './error-page.js'
import type { FormOutcome } from './form-once.js'
import { submitOnce } from './form-once.js'
import { formTokenInput } from './form-token.js'
import { html } from './html.js'
import { secretField } from './secret-field.js'
import { crumbs, formatTime, settingsTabs, tenantName } from './key-views.js'
import { csrfInput, page } from './layout.js'
import { takeReveal } from './one-time-display.js'
import type { ConsolePaths } from './paths.js'
import { consoleRoutes } from './paths.js'
import type { ConsoleSession } from './sessions.js'

type TenantParams = { tenantId: string }
type CreatedParams = TenantParams & { invitationId: string }
type TokenParams = { token: string }

interface InviteForm {
  email?: string
  role?: string
  subAccountId?: string
  error?: string
}

function invitePage(
  paths: ConsolePaths,
  session: ConsoleSession,
  area: KeyArea,
  subAccounts: ReadonlyArray<{ id: string; name: string }>,
  form: InviteForm = {},
): string {
  const wrong = form.error !== undefined
  return page({
    paths,
    title: `${wrong ? 'Error: ' : ''}Invite a member`,
    session,
    crumbs: crumbs(paths, area, undefined, { label: 'Invite a member', href: paths.agencyInvite(area.agency.id) }),
    body: html`<h1>Invite a member</h1>
<p class="lede">Invite a person to ${tenantName(area)}. They get a link that works once, for 7 days, and set their own password with it.</p>
${settingsTabs(area, 'invite')}
<form method="post" action="${paths.agencyInvite(area.agency.id)}" class="panel" novalidate>
  ${csrfInput(session.csrfToken)}${formTokenInput()}
  <div class="field">
    <label for="invite-email">Email</label>
    <input type="email" id="invite-email" name="email" autocomplete="off" value="${form.email ?? ''}"${wrong ? html` aria-invalid="true" aria-describedby="invite-email-error"` : ''}>
    ${wrong && html`<p class="field-error" id="invite-email-error" role="alert">${form.error}</p>`}
  </div>
  <fieldset>
    <legend>Role</legend>
    <div class="choice"><input type="radio" id="invite-member" name="role" value="member"${form.role !== 'admin' ? ' checked' : ''}><label for="invite-member">Member: sees the agency’s keys, manages the keys of their sub-account</label></div>
    <div class="choice"><input type="radio" id="invite-admin" name="role" value="admin"${form.role === 'admin' ? ' checked' : ''}><label for="invite-admin">Admin: manages every key of the agency and its sub-accounts</label></div>
  </fieldset>
  <div class="field">
    <label for="invite-sub-account">Sub-account (for a member)</label>
    <select id="invite-sub-account" name="subAccountId">
      <option value="">None yet</option>
      ${subAccounts.map((sub) => html`<option value="${sub.id}"${sub.id === form.subAccountId ? ' selected' : ''}>${sub.name}</option>`)}
    </select>
  </div>
  <div class="actions"><button type="submit">Create invitation link</button></div>
</form>`,
  })
}

/** The new invitation's link (`link` undefined: it was shown already, or too long ago, and cannot be again). */
function invitedPage(paths: ConsolePaths, session: ConsoleSession, area: KeyArea, invitation: { email: string; expiresAt: Date }, link?: string): string {
  const { email } = invitation
  const again = html`<p class="actions"><a class="button" href="${paths.agencyInvite(area.agency.id)}">Invite someone else</a></p>`
  const body =
    link === undefined
      ? html`<h1>Invitation created</h1>
<div class="warning" role="alert"><p>The invitation for ${email} was created, and its link has already been shown once: it cannot be shown again.
If you did not copy it, invite ${email} again: the new link is the one to send.</p></div>
${again}`
      : html`<h1>Invitation created</h1>
<div class="warning" role="alert"><p><strong>Copy this link now and send it to ${email}. It will not be shown again.</strong></p></div>
${secretField('invitation-link', html`Invitation link for ${email}`, link)}
<p>It works once, until ${formatTime(invitation.expiresAt.toISOString(), '—')}.</p>
${again}`
  return page({
    paths,
    title: 'Invitation created',
    session,
    crumbs: crumbs(paths, area, 'Invitation created', { label: 'Invite a member', href: paths.agencyInvite(area.agency.id) }),
    body,
  })
}

function acceptPage(paths: ConsolePaths, token: string, invitation: { email: string; agencyName: string }, error?: string): string {
  return page({
    paths,
    title: `${error === undefined ? '' : 'Error: '}Accept the invitation`,
    body: html`<h1>Join ${invitation.agencyName}</h1>
<p class="lede">You were invited as <strong>${invitation.email}</strong>. Choose a password to create your account.</p>
<form method="post" action="${paths.invitation(token)}" class="panel" novalidate>
  <div class="field">
    <label for="new-password">Password</label>
    <p class="hint" id="new-password-hint">At least 10 characters; a long phrase is best.</p>
    <input type="password" id="new-password" name="password" autocomplete="new-password" aria-describedby="new-password-hint${error === undefined ? '' : ' new-password-error'}"${
      error === undefined ? '' : html` aria-invalid="true"`
    }>
    ${error !== undefined && html`<p class="field-error" id="new-password-error" role="alert">${error}</p>`}
  </div>
  <div class="actions"><button type="submit">Create account</button></div>
</form>`,
  })
}

function goneInvitation(): ApiError {
  return new ApiError('notFound', 'This invitation link has expired or was already used. Ask whoever invited you for a new one.')
}

/** The absolute link, as the browser reached the console. */
function linkFor(request: FastifyRequest, path: string): string {
  return `${request.protocol}://${request.host}${path}`
}

export async function invitationRoutes(app: FastifyInstance, options: { pool: Pool; paths: ConsolePaths; now: () => Date }): Promise<void> {
  const { pool, paths, now } = options
  const invitations = new InvitationStore(pool)
  const inviterArea = async (request: FastifyRequest<{ Params: TenantParams }>): Promise<KeyArea> => {
    const area = await agencyKeyArea(pool, paths, sessionOf(request).userId, request.params.tenantId)
    requireManage(area)
    return area
  }
  const subAccountsOf = async (request: FastifyRequest, area: KeyArea): Promise<Array<{ id: string; name: string }>> =>
    (await consoleHome(pool, sessionOf(request).userId)).agencies.find((agency) => agency.id === area.agency.id)?.subAccounts ?? []

  app.get<{ Params: TenantParams }>(consoleRoutes.agencyInvite, async (request, reply) => {
    const area = await inviterArea(request)
    return sendPage(reply, 200, invitePage(paths, sessionOf(request), area, await subAccountsOf(request, area)))
  })

  app.post<{ Params: TenantParams }>(consoleRoutes.agencyInvite, { bodyLimit: FORM_BODY_LIMIT }, async (request, reply) => {
    const area = await inviterArea(request)
    const subAccounts = await subAccountsOf(request, area)
    const form: InviteForm = {
      email: formField(request, 'email') ?? '',
      role: formField(request, 'role') ?? 'member',
      subAccountId: formField(request, 'subAccountId') ?? '',
    }
    const role: InvitedRole = form.role === 'admin' ? 'admin' : 'member'
    const subAccount = role === 'member' ? subAccounts.find((sub) => sub.id === form.subAccountId) : undefined
    return submitOnce({ pool, paths, now }, request, reply, async (): Promise<FormOutcome> => {
      let invited: Awaited<ReturnType<InvitationStore['create']>>
      try {
        const actor = userActor(sessionOf(request).userId, request.ip)
        invited = await invitations.create({ agencyId: area.agency.id, subAccountId: subAccount?.id ?? null, email: form.email, role }, actor, now())
      } catch (error) {
        if (!isApiError(error) || (error.statusCode !== 400 && error.statusCode !== 409)) throw error
        return { kind: 'page', status: error.statusCode, body: invitePage(paths, sessionOf(request), area, subAccounts, { ...form, error: error.message }) }
      }
      request.log.info({ agencyId: area.agency.id, role }, 'console: member invited')
      return {
        kind: 'redirect',
        location: paths.agencyInvitationCreated(area.agency.id, invited.id),
        reveal: { kind: 'invitation', id: invited.id, secret: invited.token },
      }
    })
  })

  app.get<{ Params: CreatedParams }>(consoleRoutes.agencyInvitationCreated, async (request, reply) => {
    const session = sessionOf(request)
    const area = await inviterArea(request)
    const id = uuidOrNotFound(request.params.invitationId, () => new ApiError('notFound'))
    const invitation = await invitations.ofAgency(id, area.agency.id)
    if (invitation === undefined) throw new ApiError('notFound')
    const token = await takeReveal(pool, 'invitation', session.tokenHash, id, request.cookies[REVEAL_COOKIE], now())
    reply.clearCookie(REVEAL_COOKIE, cookieOptions(paths.agencyInvitationCreated(area.agency.id, id)))
    const link = token === undefined ? undefined : linkFor(request, paths.invitation(token))
    return sendPage(reply, link === undefined ? 410 : 200, invitedPage(paths, session, area, invitation, link))
  })
}

/** The invitation link's page, for a person without a session. */
export async function acceptInvitationRoutes(app: FastifyInstance, options: { pool: Pool; paths: ConsolePaths; now: () => Date }): Promise<void> {
  const { pool, paths, now } = options
  const invitations = new InvitationStore(pool)

  app.get<{ Params: TokenParams }>(consoleRoutes.invitation, async (request, reply) => {
    const invitation = await invitations.find(request.params.token, now())
    if (invitation === undefined) throw goneInvitation()
    return sendPage(reply, 200, acceptPage(paths, request.params.token, invitation))
  })

  app.post<{ Params: TokenParams }>(consoleRoutes.invitation, { bodyLimit: FORM_BODY_LIMIT }, async (request, reply) => {
    // No session to hold a CSRF token: the token in the path is the secret, and the post must come from the console's own page.
    if (!isSameOrigin(request)) throw new ApiError('forbidden', 'This form did not come from this site')
    const token = request.params.token
    const invitation = await invitations.find(token, now())
    if (invitation === undefined) throw goneInvitation()
    try {
      const user = await invitations.accept(token, formField(request, 'password') ?? '', request.ip, now())
      request.log.info({ userId: user.id, agencyId: invitation.agencyId }, 'console: invitation accepted')
    } catch (error) {
      if (!isApiError(error) || error.statusCode !== 400) throw error
      return sendPage(reply, 400, acceptPage(paths, token, invitation, error.message))
    }
    return reply.redirect(`${paths.signIn}?invited=1`, 303)
  })
}
