import t from 'tap'
import { KeyService } from '@scoped/agency-service/keys/key-service'
import { KeyRevocationNotifier } from '@scoped/shared/key-invalidation'
import { hashKey, parseKey } from '@scoped/shared/keys'
import { lookupKeyByHash, recordLastUse } from '@scoped/shared/key-store'
import { createTestDatabase } from '../helpers/database.js'
import { createTestTenants } from '../helpers/tenants.js'

t.test('key lifecycle', async (t) => {
  const db = await createTestDatabase(t)
  const keys = new KeyService(db.pool, new KeyRevocationNotifier(db.pool, null))
  const tenants = await createTestTenants(db.pool)
  const subOwner = { scope: 'SUB-ACCOUNT', subAccountId: tenants.subAccountId } as const
  const agencyOwner = { scope: 'AGENCY', agencyId: tenants.agencyId } as const

  t.test('create returns the plaintext once; only the hash is stored', async (t) => {
    const created = await keys.create(subOwner, '  crm import  ', 'test')
    t.equal(created.name, 'crm import', 'the name is trimmed')
    t.equal(created.scope, 'SUB-ACCOUNT')
    t.ok(parseKey(created.key).ok)
    const { rows } = await db.pool.query('SELECT * FROM api_keys WHERE id = $1', [created.id])
    t.equal(rows[0].key_hash, hashKey(created.key))
    t.notOk(JSON.stringify(rows[0]).includes(created.key.slice(9, 30)), 'no part of the secret in the row')
    const listed = await keys.list(subOwner)
    t.notOk(JSON.stringify(listed).includes(created.key), 'the list never shows the plaintext')
    t.notOk(JSON.stringify(listed).includes(hashKey(created.key)), 'the list never shows the hash')
    t.same(await lookupKeyByHash(db.pool, hashKey(created.key)), {
      status: 'active',
      tenant: { scope: 'SUB-ACCOUNT', agencyId: tenants.agencyId, subAccountId: tenants.subAccountId, keyId: created.id },
      version: 1,
    })
  })

  t.test('creating a key never invalidates another', async (t) => {
    const first = await keys.create(agencyOwner, 'first', 'test')
    await keys.create(agencyOwner, 'second', 'test')
    t.equal((await lookupKeyByHash(db.pool, hashKey(first.key))).status, 'active')
    const agencyKey = await lookupKeyByHash(db.pool, hashKey(first.key))
    t.same(agencyKey, { status: 'active', tenant: { scope: 'AGENCY', agencyId: tenants.agencyId, subAccountId: null, keyId: first.id }, version: 1 })
  })

  t.test('revoke keeps the record and its last-used time; the key no longer authenticates', async (t) => {
    const created = await keys.create(subOwner, 'to revoke', 'test')
    const usedAt = new Date('2026-01-02T03:04:05.000Z')
    await recordLastUse(db.pool, new Map([[created.id, usedAt]]))
    const result = await keys.revoke(created.id, 'user:someone')
    t.equal(result.id, created.id)
    t.equal((await lookupKeyByHash(db.pool, hashKey(created.key))).status, 'revoked')
    const listed = (await keys.list(subOwner)).find((key) => key.id === created.id)
    t.match(listed, { name: 'to revoke', scope: 'SUB-ACCOUNT', status: 'revoked', lastUsedAt: usedAt.toISOString() })
    t.type(listed?.revokedAt, 'string')
    // Use after revocation (a request in flight at the time) still moves the audit time forward.
    const later = new Date('2026-01-03T00:00:00.000Z')
    await recordLastUse(db.pool, new Map([[created.id, later]]))
    await recordLastUse(db.pool, new Map([[created.id, usedAt]]))
    t.equal((await keys.find(created.id))?.lastUsedAt, later.toISOString(), 'an older flush never moves it back')
    await keys.revoke(created.id, 'again')
    t.equal((await keys.find(created.id))?.revokedAt, listed?.revokedAt, 'revoking twice changes nothing')
  })

  t.test('delete removes the record; the hash stays only as a tombstone', async (t) => {
    const created = await keys.create(subOwner, 'to delete', 'test')
    await keys.delete(created.id, 'test')
    t.equal(await keys.find(created.id), undefined)
    t.equal((await lookupKeyByHash(db.pool, hashKey(created.key))).status, 'deleted')
    const { rows } = await db.pool.query('SELECT * FROM deleted_api_keys WHERE key_hash = $1', [hashKey(created.key)])
    t.same(Object.keys(rows[0]).sort(), ['deleted_at', 'key_hash'], 'hash and time only')
    await t.rejects(keys.delete(created.id, 'test'), { message: 'API key not found', statusCode: 404 })
    await t.rejects(keys.revoke(created.id, 'test'), { message: 'API key not found' })
  })

  t.test('a revoked key can still be deleted', async (t) => {
    const created = await keys.create(subOwner, 'revoked then deleted', 'test')
    await keys.revoke(created.id, 'test')
    await keys.delete(created.id, 'test')
    t.equal((await lookupKeyByHash(db.pool, hashKey(created.key))).status, 'deleted')
  })

  t.test('an unknown key is unknown', async (t) => {
    t.same(await lookupKeyByHash(db.pool, hashKey('sak_live_nothing')), { status: 'unknown' })
  })

  t.test('audit events record create, revoke and delete with their actor', async (t) => {
    const created = await keys.create(subOwner, 'audited', 'user:a')
    await keys.revoke(created.id, 'user:b')
    await keys.delete(created.id, 'user:c')
    const { rows } = await db.pool.query('SELECT event, actor, key_name, scope FROM api_key_events WHERE key_id = $1 ORDER BY id', [created.id])
    t.same(rows, [
      { event: 'created', actor: 'user:a', key_name: 'audited', scope: 'SUB-ACCOUNT' },
      { event: 'revoked', actor: 'user:b', key_name: 'audited', scope: 'SUB-ACCOUNT' },
      { event: 'deleted', actor: 'user:c', key_name: 'audited', scope: 'SUB-ACCOUNT' },
    ])
  })

  t.test('scope and tenant never change (a name may, migration 016); a revoked key is never restored', async (t) => {
    const created = await keys.create(subOwner, 'fixed', 'test')
    for (const change of [`scope = 'AGENCY', sub_account_id = NULL`, `sub_account_id = '${tenants.otherSubAccountId}'`]) {
      await t.rejects(db.pool.query(`UPDATE api_keys SET ${change} WHERE id = $1`, [created.id]), /never change/, change)
    }
    await keys.revoke(created.id, 'test')
    await t.rejects(db.pool.query('UPDATE api_keys SET revoked_at = NULL, revoked_by = NULL WHERE id = $1', [created.id]), /cannot be restored|never changes/)
  })

  t.test("an owner constraint hides other tenants' keys", async (t) => {
    const created = await keys.create(subOwner, 'mine', 'test')
    const other = { scope: 'SUB-ACCOUNT', subAccountId: tenants.otherSubAccountId } as const
    t.equal(await keys.find(created.id, other), undefined)
    await t.rejects(keys.revoke(created.id, 'test', other), { message: 'API key not found' })
    await t.rejects(keys.delete(created.id, 'test', agencyOwner), { message: 'API key not found' })
    t.equal((await keys.find(created.id))?.status, 'active')
  })

  t.test('bad input is refused with a clear message', async (t) => {
    await t.rejects(keys.create(subOwner, '', 'test'), { message: 'name must be 1 to 100 printable characters', statusCode: 400 })
    await t.rejects(keys.create(subOwner, 'x'.repeat(101), 'test'), { name: 'ApiError', statusCode: 400 })
    await t.rejects(keys.create(subOwner, 'tab\there', 'test'), { name: 'ApiError', statusCode: 400 })
    await t.rejects(keys.create({ scope: 'SUB-ACCOUNT', subAccountId: 'nope' }, 'x', 'test'), { message: 'sub-account id must be a UUID' })
    await t.rejects(keys.create({ scope: 'AGENCY', agencyId: '00000000-0000-4000-8000-000000000000' }, 'x', 'test'), {
      message: 'Agency not found',
      statusCode: 404,
    })
    await t.rejects(keys.revoke('not-a-uuid', 'test'), { message: 'key id must be a UUID' })
  })
})
