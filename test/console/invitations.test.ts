/**
 * Issue 34, finding 10 (in-process, over a real Postgres): an agency's owners
 * and admins invite a member, and the invitation form is sent once like
 * create key. Two submissions of one form token make one invitation (one
 * audit entry) and are sent to the same page, which shows the link once; a
 * reload or a later repeat says it cannot be shown again. A refused form is
 * judged again; a member may not invite.
 */
import t from 'tap'
import { createHash } from 'node:crypto'
import type { LightMyRequestResponse } from 'fastify'
import { ConsoleClient, createWorld, csrfToken, formTokenOf, signedIn, startConsole } from './console-harness.js'

function linkOf(page: LightMyRequestResponse): string | undefined {
  return /id="invitation-link" readonly value="([^"]+)"/.exec(page.body)?.[1]
}

function revealCookieOf(response: LightMyRequestResponse): string | undefined {
  return response.cookies.find((cookie) => cookie.name === '__Secure-sak-console-reveal')?.value
}

t.test('two invitations with one form token at the same moment: one invitation, both sent to its link, shown once', async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)
  const owner = await signedIn(app, world.owner.email)
  const invitePath = `/console/agencies/${world.agencyId}/invitations/new`
  const page = await owner.get(invitePath)
  t.match(page.body, '<button type="submit">Create invitation link</button>')
  const form = {
    csrf: csrfToken(page.body),
    formToken: formTokenOf(page.body)!,
    email: 'new.person@example.test',
    role: 'member',
    subAccountId: world.subAccountId,
  }

  const [first, second] = await Promise.all([owner.post(invitePath, form), owner.post(invitePath, form)])
  t.equal(first.statusCode, 303)
  t.equal(second.statusCode, 303)
  t.equal(first.headers.location, second.headers.location, 'the same redirect')
  t.equal(revealCookieOf(first), revealCookieOf(second), 'with the same cookie for the one-time display')
  const { rows } = await pool.query<{ id: string; token_hash: string; sub_account_id: string }>(
    `SELECT id, token_hash, sub_account_id FROM console_invitations`,
  )
  t.equal(rows.length, 1, 'exactly one invitation was made')
  t.equal(first.headers.location, `/console/agencies/${world.agencyId}/invitations/${rows[0]!.id}/created`)
  t.equal(rows[0]!.sub_account_id, world.subAccountId)
  const audited = await pool.query(`SELECT 1 FROM audit_events WHERE type = 'invitation.created'`)
  t.equal(audited.rowCount, 1, 'and audited once')

  const shown = await owner.get(String(second.headers.location))
  t.equal(shown.statusCode, 200)
  const link = linkOf(shown)!
  t.match(link, /^http:\/\/localhost(:80)?\/console\/invitations\/[A-Za-z0-9_-]{43}$/)
  const token = link.slice(-43)
  t.equal(createHash('sha256').update(token).digest('hex'), rows[0]!.token_hash, 'the page shows the link of the invitation made')
  t.match(shown.body, 'Copy this link now and send it to new.person@example.test. It will not be shown again.')
  t.match(shown.body, 'It works once, until ')

  const reload = await owner.get(String(second.headers.location))
  t.equal(reload.statusCode, 410, 'shown once: a reload says it cannot be shown again')
  t.match(reload.body, 'its link has already been shown once: it cannot be shown again')
  t.notOk(reload.body.includes(token))
  const later = await owner.post(invitePath, form)
  t.equal(later.headers.location, first.headers.location, 'a later repeat of the form gets the first answer too')
  const afterRepeat = await owner.get(String(later.headers.location))
  t.equal(afterRepeat.statusCode, 410, 'which no longer shows the link')
  t.notOk(afterRepeat.body.includes(token))
  t.equal((await pool.query(`SELECT 1 FROM console_invitations`)).rowCount, 1, 'and makes no invitation')
  const stored = await pool.query<{ sealed_key: Buffer | null }>(`SELECT sealed_key FROM console_form_submissions`)
  t.same(stored.rows, [{ sealed_key: null }], 'nothing of the link is kept once shown')

  const invited = await new ConsoleClient(app).get(`/console/invitations/${token}`)
  t.equal(invited.statusCode, 200, 'the link shown is one that works')
  t.match(invited.body, 'You were invited as <strong>new.person@example.test</strong>')
})

t.test('a refused invitation is judged again with the same token; an admin invites; a member may not', async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)
  const admin = await signedIn(app, world.admin.email)
  const invitePath = `/console/agencies/${world.agencyId}/invitations/new`
  const page = await admin.get(invitePath)
  const form = { csrf: csrfToken(page.body), formToken: formTokenOf(page.body)!, role: 'admin', subAccountId: '' }

  const taken = await admin.post(invitePath, { ...form, email: world.member.email })
  t.equal(taken.statusCode, 409, 'an email that has an account')
  t.match(taken.body, '<title>Error: Invite a member')
  t.match(taken.body, 'A user with this email already exists')
  const bad = await admin.post(invitePath, { ...form, email: 'not an email' })
  t.equal(bad.statusCode, 400)
  t.match(bad.body, 'aria-invalid="true" aria-describedby="invite-email-error"', 'the email field is marked')
  t.equal((await pool.query(`SELECT 1 FROM console_invitations`)).rowCount, 0, 'nothing made')
  const corrected = await admin.post(invitePath, { ...form, email: 'second.admin@example.test' })
  t.equal(corrected.statusCode, 303, 'the same token, corrected, is judged again (a refusal changed nothing)')
  const shown = await admin.get(String(corrected.headers.location))
  t.ok(linkOf(shown), 'and its link is shown')
  t.equal((await admin.get(String(corrected.headers.location))).statusCode, 410)

  const elsewhere = await signedIn(app, world.owner.email)
  t.equal((await elsewhere.get(String(corrected.headers.location))).statusCode, 410, 'another session never sees the link')

  const member = await signedIn(app, world.member.email)
  t.equal((await member.get(invitePath)).statusCode, 403, 'a member is refused the form')
  const memberToken = csrfToken((await member.get('/console')).body)
  t.equal((await member.post(invitePath, { csrf: memberToken, email: 'sneaky@example.test', role: 'admin' })).statusCode, 403, 'and the post')
  t.equal((await member.get(String(corrected.headers.location))).statusCode, 403, 'and the link’s page')
  t.equal((await pool.query(`SELECT 1 FROM console_invitations`)).rowCount, 1)
})
