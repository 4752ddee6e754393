/**
 * Agency settings → Members (issue 16): the agency's owners list its members
 * and remove a membership (of the agency, with its sub-accounts', or of one
 * sub-account) or disable an account that belongs to this agency alone; each
 * confirmed, CSRF-protected, in the audit trail with the owner and the client
 * address, and in effect on the member's very next page.
 */
import t from 'tap'
import { SIGN_IN_FAILED_MESSAGE } from '@scoped/agency-service/console/sign-in'
import { ConsoleClient, createUserWith, createWorld, csrfToken, flushRefusals, PASSWORD, signedIn, startConsole } from './console-harness.js'

interface EventRow {
  type: string
  actor_kind: string
  actor_id: string
  sub_account_id: string | null
  user_id: string | null
  role: string | null
  client_address: string | null
}

const OWNER_ADDRESS = '198.51.100.20'

t.test('owners see the members page; admins and members are refused it, other agencies do not find it', async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)
  const globex = await createWorld(pool, 'Globex')
  const membersPath = `/console/agencies/${world.agencyId}/members`

  const owner = await signedIn(app, world.owner.email)
  const home = await owner.get('/console')
  t.match(home.body, `<a href="${membersPath}">Agency settings: members</a>`, 'the owner’s home links to it')
  t.match((await owner.get(`/console/agencies/${world.agencyId}/keys`)).body, `<a href="${membersPath}">Members</a>`, 'a tab of agency settings')
  const page = await owner.get(membersPath)
  t.equal(page.statusCode, 200)
  t.match(page.body, '<h1>Members</h1>')
  t.match(page.body, 'aria-current="page">Members</a>')
  for (const [user, role] of [
    [world.owner, 'Owner'],
    [world.admin, 'Admin'],
    [world.member, 'Member'],
  ] as const) {
    t.match(
      page.body,
      new RegExp(`<th scope="row" data-label="Email">${user.email}</th>\\s*<td data-label="Role">${role}</td>`),
      `${user.email} is listed as ${role}`,
    )
  }
  t.match(page.body, 'Acme West', 'with the sub-accounts each belongs to')
  t.notMatch(page.body, globex.owner.email, 'and nobody of another agency')
  t.notMatch(page.body, `${membersPath}/${world.owner.id}/`, 'no action on the owner’s own account')
  t.match(page.body, `${membersPath}/${world.member.id}/disable`)
  t.match(page.body, `${membersPath}/${world.member.id}/sub-accounts/${world.subAccountId}/remove`)

  for (const user of [world.admin, world.member]) {
    const client = await signedIn(app, user.email)
    const refused = await client.get(membersPath)
    t.equal(refused.statusCode, 403, `${user.email}: 403`)
    t.match(refused.body, 'Only agency owners can manage the agency’s members')
    t.notMatch((await client.get('/console')).body, membersPath, 'and it is not offered')
    t.notMatch((await client.get(`/console/agencies/${world.agencyId}/keys`)).body, membersPath)
    const token = csrfToken((await client.get('/console')).body)
    t.equal((await client.post(`${membersPath}/${world.owner.id}/remove`, { csrf: token })).statusCode, 403, 'nor can they post to it')
  }
  const outsider = await signedIn(app, globex.owner.email)
  t.equal((await outsider.get(membersPath)).statusCode, 404, 'another agency’s owner: not found')
  const token = csrfToken((await outsider.get('/console')).body)
  t.equal((await outsider.post(`${membersPath}/${world.member.id}/disable`, { csrf: token })).statusCode, 404)
  const count = await pool.query(`SELECT 1 FROM agency_memberships WHERE agency_id = $1`, [world.agencyId])
  t.equal(count.rowCount, 3, 'nothing was removed')
})

t.test('an owner removes a sub-account membership, then an agency membership with its sub-accounts’; each in effect at once', async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)
  const membersPath = `/console/agencies/${world.agencyId}/members`
  const owner = await signedIn(app, world.owner.email, OWNER_ADDRESS)
  const member = await signedIn(app, world.member.email)
  const subKeys = `/console/sub-accounts/${world.subAccountId}/keys`
  t.equal((await member.get(subKeys)).statusCode, 200)

  const subRemove = `${membersPath}/${world.member.id}/sub-accounts/${world.subAccountId}/remove`
  const confirm = await owner.get(subRemove)
  t.equal(confirm.statusCode, 200)
  t.match(confirm.body, '<h1>Remove from the sub-account?</h1>')
  t.match(confirm.body, `<form method="post" action="${subRemove}">`)
  t.equal((await owner.post(subRemove, {})).statusCode, 403, 'not without the CSRF token')
  t.equal((await member.get(subKeys)).statusCode, 200, 'so nothing changed')
  const removed = await owner.post(subRemove, { csrf: csrfToken(confirm.body) })
  t.equal(removed.statusCode, 303)
  t.equal(removed.headers.location, membersPath, 'no notice in the address')
  t.match((await owner.get(String(removed.headers.location))).body, `Removed ${world.member.email} from Acme West.`, 'the notice names whom')
  t.notMatch((await owner.get(membersPath)).body, 'Removed ', 'and is shown once')
  t.equal((await member.get(subKeys)).statusCode, 404, 'the member’s next page: the sub-account is gone')
  t.equal((await member.get(`/console/agencies/${world.agencyId}/keys`)).statusCode, 200, 'the agency is still theirs')
  t.equal((await owner.get(subRemove)).statusCode, 404, 'a membership that is gone is not found')

  // The admin belongs to the other sub-account too: removing the agency membership takes it along.
  await pool.query(`INSERT INTO sub_account_memberships (user_id, sub_account_id) VALUES ($1, $2)`, [world.admin.id, world.otherSubAccountId])
  const admin = await signedIn(app, world.admin.email)
  const agencyRemove = `${membersPath}/${world.admin.id}/remove`
  const confirmAgency = await owner.get(agencyRemove)
  t.match(confirmAgency.body, '<h1>Remove from the agency?</h1>')
  t.match(confirmAgency.body, 'Acme East', 'naming the sub-account memberships that go with it')
  t.equal((await owner.post(agencyRemove, { csrf: csrfToken(confirmAgency.body) })).statusCode, 303)
  t.equal((await admin.get(`/console/agencies/${world.agencyId}/keys`)).statusCode, 404, 'the admin’s next page: the agency is gone')
  t.equal((await admin.get(`/console/sub-accounts/${world.otherSubAccountId}/keys`)).statusCode, 404, 'and its sub-accounts')
  t.match((await admin.get('/console')).body, 'You do not belong to any agency yet', 'still signed in, with nothing left')
  t.same((await pool.query(`SELECT 1 FROM sub_account_memberships WHERE user_id = $1`, [world.admin.id])).rows, [])
  t.match((await owner.get(membersPath)).body, `${world.admin.email} was removed from the agency`, 'the notice names whom')
  t.notMatch((await owner.get(membersPath)).body, world.admin.email, 'no longer listed')

  const { rows } = await pool.query<EventRow>(
    `SELECT type, actor_kind, actor_id, sub_account_id, user_id, role, host(client_address) AS client_address
       FROM audit_events WHERE agency_id = $1 AND type = 'membership.removed' ORDER BY seq`,
    [world.agencyId],
  )
  const byOwner = { actor_kind: 'user', actor_id: world.owner.id, client_address: OWNER_ADDRESS }
  t.same(rows, [
    { type: 'membership.removed', ...byOwner, sub_account_id: world.subAccountId, user_id: world.member.id, role: 'member' },
    { type: 'membership.removed', ...byOwner, sub_account_id: null, user_id: world.admin.id, role: 'admin' },
    { type: 'membership.removed', ...byOwner, sub_account_id: world.otherSubAccountId, user_id: world.admin.id, role: 'admin' },
  ])
  const trail = await owner.get(`/console/agencies/${world.agencyId}/audit?type=membership.removed`)
  t.match(trail.body, '<option value="membership.removed" selected>Membership removed</option>', 'the trail’s filter knows the type')
  t.match(trail.body, world.admin.email, 'the removed user is named, though no longer a member')
})

t.test('an owner disables an account of this agency alone: its sessions end at once and sign-in is refused', async (t) => {
  const started = await startConsole(t)
  const { app, pool } = started
  const world = await createWorld(pool)
  const membersPath = `/console/agencies/${world.agencyId}/members`
  const owner = await signedIn(app, world.owner.email, OWNER_ADDRESS)
  const member = await signedIn(app, world.member.email)
  const disablePath = `${membersPath}/${world.member.id}/disable`

  const confirm = await owner.get(disablePath)
  t.equal(confirm.statusCode, 200)
  t.match(confirm.body, '<h1>Disable the account?</h1>')
  const disabled = await owner.post(disablePath, { csrf: csrfToken(confirm.body) })
  t.equal(disabled.statusCode, 303)
  t.equal(disabled.headers.location, membersPath)

  const next = await member.get('/console')
  t.equal(next.statusCode, 303, 'the member’s very next request has no session')
  t.equal(next.headers.location, '/console/sign-in')
  const again = await new ConsoleClient(app).signIn(world.member.email)
  t.equal(again.statusCode, 401, 'the right password no longer signs in')
  t.match(again.body, SIGN_IN_FAILED_MESSAGE, 'refused exactly like a wrong password')
  const list = await owner.get(String(disabled.headers.location))
  t.match(list.body, `The account of ${world.member.email} was disabled.`)
  t.match(list.body, new RegExp(`${world.member.email}</th>[\\s\\S]*?Disabled`), 'listed as disabled')
  t.notMatch(list.body, disablePath, 'with nothing more to disable')

  await flushRefusals(started)
  t.match((await owner.get(`/console/agencies/${world.agencyId}/audit`)).body, '(1 in that minute)', 'the trail page shows the count of the refusals')
  const { rows } = await pool.query<EventRow>(
    `SELECT type, actor_kind, actor_id, sub_account_id, user_id, role, host(client_address) AS client_address
       FROM audit_events WHERE agency_id = $1 AND type IN ('user.disabled', 'user.sign-in-refused') ORDER BY seq`,
    [world.agencyId],
  )
  t.same(rows, [
    {
      type: 'user.disabled',
      actor_kind: 'user',
      actor_id: world.owner.id,
      client_address: OWNER_ADDRESS,
      sub_account_id: null,
      user_id: world.member.id,
      role: 'member',
    },
    {
      type: 'user.sign-in-refused',
      actor_kind: 'user',
      actor_id: world.member.id,
      client_address: '203.0.113.10',
      sub_account_id: null,
      user_id: world.member.id,
      role: 'member',
    },
  ])
})

t.test('an account that belongs to another agency too is removed from this one, never disabled from it', async (t) => {
  const { app, pool } = await startConsole(t)
  const acme = await createWorld(pool, 'Acme')
  const globex = await createWorld(pool, 'Globex')
  const shared = await createUserWith(pool, acme.agencyId, 'member')
  await pool.query(`INSERT INTO agency_memberships (user_id, agency_id, role) VALUES ($1, $2, 'admin')`, [shared.id, globex.agencyId])
  const membersPath = `/console/agencies/${acme.agencyId}/members`
  const owner = await signedIn(app, acme.owner.email)

  const list = await owner.get(membersPath)
  t.match(list.body, 'Also in another agency: it can be removed from this one, not disabled')
  t.notMatch(list.body, 'Globex', 'without naming the other agency')
  t.notMatch(list.body, `${membersPath}/${shared.id}/disable`, 'no disable link')
  const token = csrfToken(list.body)
  const getDisable = await owner.get(`${membersPath}/${shared.id}/disable`)
  t.equal(getDisable.statusCode, 409)
  t.match(getDisable.body, 'remove them from this agency instead')
  t.equal((await owner.post(`${membersPath}/${shared.id}/disable`, { csrf: token })).statusCode, 409, 'the server refuses it too')
  t.same((await pool.query(`SELECT disabled_at FROM users WHERE id = $1`, [shared.id])).rows, [{ disabled_at: null }])

  t.equal((await owner.post(`${membersPath}/${shared.id}/remove`, { csrf: token })).statusCode, 303, 'removing works')
  const person = await signedIn(app, shared.email)
  const home = await person.get('/console')
  t.match(home.body, 'Globex', 'the person still signs in, to the other agency')
  t.notMatch(home.body, 'Acme')
})

t.test('an owner cannot act on their own account, a stranger, or another agency’s sub-account', async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)
  const globex = await createWorld(pool, 'Globex')
  const membersPath = `/console/agencies/${world.agencyId}/members`
  const owner = await signedIn(app, world.owner.email)
  const token = csrfToken((await owner.get(membersPath)).body)

  for (const action of ['remove', 'disable']) {
    const self = `${membersPath}/${world.owner.id}/${action}`
    t.equal((await owner.get(self)).statusCode, 403, `GET ${action} of oneself`)
    const post = await owner.post(self, { csrf: token })
    t.equal(post.statusCode, 403, `POST ${action} of oneself`)
    t.match(post.body, 'You cannot remove or disable your own account here')
    for (const id of [globex.member.id, '00000000-0000-4000-8000-000000000000', 'not-a-uuid']) {
      t.equal((await owner.get(`${membersPath}/${id}/${action}`)).statusCode, 404, `GET ${action} of ${id}`)
      t.equal((await owner.post(`${membersPath}/${id}/${action}`, { csrf: token })).statusCode, 404, `POST ${action} of ${id}`)
    }
  }
  await pool.query(`INSERT INTO sub_account_memberships (user_id, sub_account_id) VALUES ($1, $2)`, [world.member.id, globex.subAccountId])
  const foreign = `${membersPath}/${world.member.id}/sub-accounts/${globex.subAccountId}/remove`
  t.equal((await owner.get(foreign)).statusCode, 404, 'another agency’s sub-account is not found')
  t.equal((await owner.post(foreign, { csrf: token })).statusCode, 404)
  t.equal((await pool.query(`SELECT 1 FROM sub_account_memberships WHERE sub_account_id = $1`, [globex.subAccountId])).rowCount, 2, 'and untouched')
  t.equal((await pool.query(`SELECT 1 FROM users WHERE disabled_at IS NOT NULL`)).rowCount, 0, 'nobody was disabled')
  t.equal((await new ConsoleClient(app).signIn(world.owner.email, PASSWORD)).statusCode, 303, 'the owner still signs in')
})
