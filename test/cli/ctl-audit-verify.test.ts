/**
 * `ctl audit verify --agency A` (migration 015's hash chain), as a process:
 * ok on a real trail; after the owner's login, with its DDL rights, switches
 * off the append-only trigger and changes or removes one event, exit 1 and a
 * message naming the first event that does not verify.
 */
import t from 'tap'
import { generateKey, hashKey } from '@scoped/shared/keys'
import { createTestDatabase } from '../helpers/database.js'
import type { TestDatabase } from '../helpers/database.js'
import { runCtl } from '../helpers/processes.js'

/** An agency with a trail of three events: a sub-account and two keys made as `ctl:ops`. */
async function agencyWithTrail(db: TestDatabase, name: string): Promise<{ agencyId: string; eventIds: string[] }> {
  const client = await db.pool.connect()
  try {
    await client.query('BEGIN')
    await client.query(`SELECT set_config('scoped.actor', '{"actor_kind":"cli","actor_id":"ctl:ops"}', true)`)
    const agencyId = (await client.query<{ id: string }>(`INSERT INTO agencies (name) VALUES ($1) RETURNING id`, [name])).rows[0]!.id
    const subId = (await client.query<{ id: string }>(`INSERT INTO sub_accounts (agency_id, name) VALUES ($1, 'West') RETURNING id`, [agencyId])).rows[0]!.id
    for (const name of ['first', 'second']) {
      await client.query(
        `INSERT INTO api_keys (scope, agency_id, sub_account_id, name, key_hash, hint, created_by) VALUES ('SUB-ACCOUNT', $1, $2, $3, $4, 'h', 'ctl:ops')`,
        [agencyId, subId, name, hashKey(generateKey())],
      )
    }
    await client.query('COMMIT')
    const { rows } = await db.pool.query<{ id: string }>(`SELECT id FROM audit_events WHERE agency_id = $1 ORDER BY chain_seq`, [agencyId])
    return { agencyId, eventIds: rows.map((row) => row.id) }
  } finally {
    client.release()
  }
}

/** What an attacker with the owner's rights does: the append-only trigger off, one statement, on again. */
async function tamper(db: TestDatabase, sql: string, id: string): Promise<void> {
  await db.pool.query(`ALTER TABLE audit_events DISABLE TRIGGER audit_events_append_only`)
  await db.pool.query(sql, [id])
  await db.pool.query(`ALTER TABLE audit_events ENABLE TRIGGER audit_events_append_only`)
}

t.test('ctl audit verify walks the chain and names the first event that does not verify', async (t) => {
  const db = await createTestDatabase(t)
  const env = { DATABASE_URL: db.url }
  const changed = await agencyWithTrail(db, 'Changed')
  const removed = await agencyWithTrail(db, 'Removed')
  t.equal(changed.eventIds.length, 3, 'three events')

  const intact = await runCtl(['audit', 'verify', '--agency', changed.agencyId], env)
  t.equal(intact.status, 0, `an intact trail verifies: ${intact.stderr}`)
  t.same(intact.json, { agencyId: changed.agencyId, events: 3, ok: true })

  await tamper(db, `UPDATE audit_events SET actor_id = 'someone else' WHERE id = $1`, changed.eventIds[1]!)
  const edited = await runCtl(['audit', 'verify', '--agency', changed.agencyId], env)
  t.equal(edited.status, 1, 'a changed event: exit 1')
  t.equal(edited.stdout, '', 'nothing on stdout')
  t.match(edited.stderr, `does not verify from event ${changed.eventIds[1]!} (number 2): its content does not match its hash`, 'naming the changed event')

  await tamper(db, `DELETE FROM audit_events WHERE id = $1`, removed.eventIds[1]!)
  const gap = await runCtl(['audit', 'verify', '--agency', removed.agencyId], env)
  t.equal(gap.status, 1, 'a removed event: exit 1')
  t.match(gap.stderr, `does not verify from event ${removed.eventIds[2]!} (number 2)`, 'naming the event after the gap')
})
