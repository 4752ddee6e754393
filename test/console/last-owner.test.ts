/**
 * An agency keeps at least one owner (migration 014), decided by the
 * database: two owners removing each other at the same moment leave one of
 * them an owner, in two transactions held open across each other as well as
 * through the console; `ctl user remove` of the last owner is refused too.
 */
import t from 'tap'
import { createTestDatabase } from '../helpers/database.js'
import { createServiceLogin } from '../helpers/database-roles.js'
import { runCtl } from '../helpers/processes.js'
import { createPool } from '@scoped/shared/db'
import { createUserWith, createWorld, csrfToken, signedIn, startConsole } from './console-harness.js'

t.test('two owners removing each other in crossing transactions: the second removal is refused', async (t) => {
  const db = await createTestDatabase(t)
  const { pool } = db
  const world = await createWorld(pool)
  const second = await createUserWith(pool, world.agencyId, 'owner')
  // As agency-service's own login, which is what removes memberships.
  const { url } = await createServiceLogin(t, db, 'scoped_agency')
  const agency = createPool(url, { max: 2, applicationName: 'last-owner-test' })
  t.teardown(() => agency.end())

  const first = await agency.connect()
  const other = await agency.connect()
  try {
    await first.query('BEGIN')
    await other.query('BEGIN')
    await first.query(`DELETE FROM agency_memberships WHERE user_id = $1 AND agency_id = $2`, [world.owner.id, world.agencyId])
    // The second removal waits for the first transaction (the agency row's lock), then checks what it left.
    const crossing = other.query(`DELETE FROM agency_memberships WHERE user_id = $1 AND agency_id = $2`, [second.id, world.agencyId]).then(
      () => 'removed',
      (error: { constraint?: string }) => error.constraint ?? String(error),
    )
    await first.query('COMMIT')
    t.equal(await crossing, 'agency_keeps_an_owner', 'the second removal is refused by the database')
    await other.query('ROLLBACK')
  } finally {
    first.release()
    other.release()
  }
  const owners = await pool.query<{ user_id: string }>(`SELECT user_id FROM agency_memberships WHERE agency_id = $1 AND role = 'owner'`, [world.agencyId])
  t.same(owners.rows, [{ user_id: second.id }], 'one owner is left')
})

t.test('through the console, at the same moment: one removal goes through, the other answers 409', async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)
  const second = await createUserWith(pool, world.agencyId, 'owner')
  const membersPath = `/console/agencies/${world.agencyId}/members`
  const alice = await signedIn(app, world.owner.email, '198.51.100.31')
  const bob = await signedIn(app, second.email, '198.51.100.32')
  const [aliceToken, bobToken] = [csrfToken((await alice.get(membersPath)).body), csrfToken((await bob.get(membersPath)).body)]
  const answers = await Promise.all([
    alice.post(`${membersPath}/${second.id}/remove`, { csrf: aliceToken }),
    bob.post(`${membersPath}/${world.owner.id}/remove`, { csrf: bobToken }),
  ])
  const statuses = answers.map((answer) => answer.statusCode).sort()
  // Whichever came second is either refused by the database (409) or, if the first had committed before its
  // checks, by the console: its user is no longer an owner (403) or no longer a member at all, so the agency is
  // not theirs to see (404). Never both removed.
  t.equal(statuses[0], 303, 'one removal went through')
  t.ok([403, 404, 409].includes(statuses[1]!), `the other was refused (${statuses[1]})`)
  const refused = answers.find((answer) => answer.statusCode !== 303)!
  if (refused.statusCode === 409) t.match(refused.body, 'is the last owner of this agency: an agency keeps at least one owner', 'and says why')
  const owners = await pool.query(`SELECT 1 FROM agency_memberships WHERE agency_id = $1 AND role = 'owner'`, [world.agencyId])
  t.equal(owners.rowCount, 1, 'the agency has an owner')
})

t.test('ctl user remove of the last owner is refused, with the reason', async (t) => {
  const { pool, url } = await createTestDatabase(t)
  const world = await createWorld(pool)
  const result = await runCtl(['user', 'remove', '--email', world.owner.email, '--agency', world.agencyId], { DATABASE_URL: url })
  t.equal(result.status, 1, 'exit 1')
  t.match(result.json, { success: false, message: `${world.owner.email} is the last owner of this agency: an agency keeps at least one owner` })
  const admin = await runCtl(['user', 'remove', '--email', world.admin.email, '--agency', world.agencyId], { DATABASE_URL: url })
  t.equal(admin.status, 0, 'removing someone else still works')
})
