/**
 * Migration 023: the trail written by triggers (015) keeps the fields later
 * migrations added. A key change nobody declared carries the key's hint and
 * its before/after, from which the console names what changed; a declared
 * key.updated keeps its changed fields; a key.leaked keeps where it was
 * reported (and its webhook carries it); an invitation is an allowed type; and the chain of all of these
 * verifies in Node (audit-chain.ts hashes the new fields only when set).
 */
import t from 'tap'
import { inTransaction } from '@scoped/shared/db'
import { generateKey, hashKey, keyHint } from '@scoped/shared/keys'
import { recordAuditEvent } from '@scoped/agency-service/audit/audit-log'
import { verifyAuditChain } from '@scoped/agency-service/audit/audit-chain'
import { eventLabel } from '@scoped/agency-service/console/audit-views'
import { createTestDatabase } from '../helpers/database.js'

interface Row {
  type: string
  key_hint: string | null
  changed_fields: string[] | null
  changes: Record<string, { before: unknown; after: unknown }> | null
  leak_source: string | null
  leak_url: string | null
  user_email: string | null
}

t.test('the new columns are written, labelled and hashed', async (t) => {
  const db = await createTestDatabase(t)
  const agencyId = (await db.pool.query<{ id: string }>(`INSERT INTO agencies (name) VALUES ('Merge') RETURNING id`)).rows[0]!.id
  const key = generateKey()
  const hint = keyHint(key)
  const keyId = (
    await db.pool.query<{ id: string }>(
      `INSERT INTO api_keys (scope, agency_id, name, key_hash, hint, created_by) VALUES ('AGENCY', $1, 'web', $2, $3, 'psql') RETURNING id`,
      [agencyId, hashKey(key), hint],
    )
  ).rows[0]!.id
  await db.pool.query(`INSERT INTO webhook_endpoints (agency_id, url, events, secret) VALUES ($1, 'https://hooks.example.com/in', '{key.leaked}', $2)`, [
    agencyId,
    `whsec_${'A'.repeat(32)}`,
  ])
  // Undeclared: the trigger's own event.
  await db.pool.query(`UPDATE api_keys SET allowed_cidrs = '{192.0.2.0/24}', rate_limit_rate = 2, rate_limit_burst = 20 WHERE id = $1`, [keyId])
  const actor = { kind: 'cli' as const, id: 'ctl:test', clientAddress: null }
  // Declared, with the fields the console names.
  await inTransaction(db.pool, async (client) => {
    await client.query(`UPDATE api_keys SET name = 'web backend' WHERE id = $1`, [keyId])
    await recordAuditEvent(client, {
      type: 'key.updated',
      actor,
      agencyId,
      subAccountId: null,
      keyId,
      keyName: 'web backend',
      scope: 'AGENCY',
      keyHint: hint,
      changedFields: ['name'],
    })
  })
  await inTransaction(db.pool, (client) =>
    recordAuditEvent(client, {
      type: 'key.leaked',
      actor,
      agencyId,
      subAccountId: null,
      keyId,
      keyName: 'web backend',
      scope: 'AGENCY',
      leak: { source: 'commit', url: 'https://github.com/o/r/blob/x/.env' },
    }),
  )
  await inTransaction(db.pool, (client) =>
    recordAuditEvent(client, { type: 'invitation.created', actor, agencyId, subAccountId: null, invitee: { email: 'new@example.com', role: 'member' } }),
  )

  const { rows } = await db.pool.query<Row>(
    `SELECT type, key_hint, changed_fields, changes, leak_source, leak_url, user_email FROM audit_events WHERE agency_id = $1 ORDER BY chain_seq`,
    [agencyId],
  )
  t.same(
    rows.map((row) => row.type),
    ['key.created', 'key.updated', 'key.updated', 'key.leaked', 'invitation.created'],
  )
  const [created, undeclared, declared, leaked, invited] = rows
  t.equal(created!.key_hint, hint, 'the trigger gives the key row’s hint')
  t.equal(undeclared!.key_hint, hint)
  t.equal(undeclared!.changed_fields, null)
  t.equal(
    eventLabel({ type: 'key.updated', changedFields: null, changes: undeclared!.changes }),
    'Key addresses and rate limit changed',
    'an undeclared change is labelled from its before/after',
  )
  t.same(declared!.changed_fields, ['name'])
  t.equal(eventLabel({ type: 'key.updated', changedFields: declared!.changed_fields, changes: declared!.changes }), 'Key name changed')
  t.same([leaked!.leak_source, leaked!.leak_url], ['commit', 'https://github.com/o/r/blob/x/.env'])
  t.equal(invited!.user_email, 'new@example.com')
  const messages = await db.pool.query<{ payload: string }>(`SELECT payload FROM webhook_messages WHERE type = 'key.leaked'`)
  t.match(
    JSON.parse(messages.rows[0]!.payload),
    { data: { url: 'https://github.com/o/r/blob/x/.env', source: 'commit' } },
    'the webhook carries the leak’s report',
  )

  t.same(await verifyAuditChain(db.pool, agencyId), { agencyId, events: 5, ok: true }, 'the chain verifies, new fields included')
  // A new field is covered by the hash: changing it breaks the chain.
  await db.pool.query(`ALTER TABLE audit_events DISABLE TRIGGER audit_events_append_only`)
  await db.pool.query(`UPDATE audit_events SET leak_url = 'https://example.com/' WHERE agency_id = $1 AND type = 'key.leaked'`, [agencyId])
  await db.pool.query(`ALTER TABLE audit_events ENABLE TRIGGER audit_events_append_only`)
  await t.rejects(verifyAuditChain(db.pool, agencyId), /changed/)
})
