/**
 * The key lifecycle past create, revoke and delete, through KeyService over
 * a real Postgres: expiry, roll with a grace period (and the limit of 25),
 * allowlists, last use with its client address, what the gateways are told
 * (the invalidation log), the database's own guards, and the audit trail.
 */
import t from 'tap'
import { ACTIVE_KEY_LIMIT, KeyService } from '@scoped/agency-service/keys/key-service'
import type { KeyOwner } from '@scoped/agency-service/keys/key-service'
import { AuditLog } from '@scoped/agency-service/audit/audit-log'
import { keyActor, userActor } from '@scoped/agency-service/audit/actor'
import { SubAccountStore } from '@scoped/agency-service/routes/sub-account-store'
import { KeyRevocationNotifier } from '@scoped/shared/key-invalidation'
import { hashKey } from '@scoped/shared/keys'
import { lookupKeyByHash, recordLastUse } from '@scoped/shared/key-store'
import { createTestDatabase } from '../helpers/database.js'
import { createTestTenants } from '../helpers/tenants.js'

const db = await createTestDatabase(t)
const keys = new KeyService(db.pool, new KeyRevocationNotifier(db.pool, null))
const LIMIT_MESSAGE = 'Active API key limit reached for this scope'

/** What the gateways were told to forget of a key (its creation, for the issued-key filters, forgets nothing). */
async function invalidations(hash: string): Promise<string[]> {
  const { rows } = await db.pool.query<{ state: string }>(`SELECT state FROM key_invalidations WHERE key_hash = $1 AND state <> 'created' ORDER BY id`, [hash])
  return rows.map((row) => row.state)
}

t.test('expiry at creation: stored, looked up for the gateways, listed, and past it the key is expired', async (t) => {
  const tenants = await createTestTenants(db.pool, 'Expiry')
  const owner: KeyOwner = { scope: 'SUB-ACCOUNT', subAccountId: tenants.subAccountId }
  const expiresAt = new Date(Date.now() + 90 * 86_400_000)
  const created = await keys.create(owner, 'quarterly', 'test', { expiresAt, allowedCidrs: ['10.0.0.0/8', '2001:db8::/32'] })
  t.equal(created.expiresAt, expiresAt.toISOString())
  t.same(created.allowedCidrs, ['10.0.0.0/8', '2001:db8::/32'])
  t.same(await lookupKeyByHash(db.pool, hashKey(created.key)), {
    status: 'active',
    tenant: { scope: 'SUB-ACCOUNT', agencyId: tenants.agencyId, subAccountId: tenants.subAccountId, keyId: created.id },
    expiresAt: expiresAt.getTime(),
    allowedCidrs: ['10.0.0.0/8', '2001:db8::/32'],
    version: 1,
  })
  t.match(await keys.find(created.id), {
    status: 'active',
    expiresAt: expiresAt.toISOString(),
    replacedBy: null,
    allowedCidrs: ['10.0.0.0/8', '2001:db8::/32'],
    countsTowardLimit: true,
  })

  const soon = await keys.create(owner, 'soon', 'test', { expiresAt: new Date(Date.now() + 1500) })
  t.equal((await keys.find(soon.id))!.status, 'active', 'before its instant: active')
  await new Promise((resolve) => setTimeout(resolve, Date.parse(soon.expiresAt!) - Date.now() + 20))
  const expired = await keys.find(soon.id)
  t.match(expired, { status: 'expired', revokedAt: null, countsTowardLimit: false }, 'past its instant: expired, the record kept')
  t.match(
    await lookupKeyByHash(db.pool, hashKey(soon.key)),
    { status: 'active', expiresAt: Date.parse(soon.expiresAt!) },
    'the gateways get the instant and decide by their clock',
  )

  await t.rejects(keys.create(owner, 'past', 'test', { expiresAt: new Date(Date.now() - 1000) }), {
    statusCode: 400,
    message: 'expiresAt must be in the future',
  })
  await t.rejects(keys.create(owner, 'bad cidr', 'test', { allowedCidrs: ['10.1.0.0/8'] }), {
    statusCode: 400,
    message: /allowedCidrs\[0\] "10\.1\.0\.0\/8" has bits set/,
  })
  await t.rejects(keys.create(owner, 'bad cidrs', 'test', { allowedCidrs: 'everyone' }), {
    statusCode: 400,
    message: 'allowedCidrs must be a list of CIDR blocks',
  })
})

t.test('an expired key does not count toward the limit', async (t) => {
  const tenants = await createTestTenants(db.pool, 'Expired limit')
  const owner: KeyOwner = { scope: 'AGENCY', agencyId: tenants.agencyId }
  const shortLived = await keys.create(owner, 'short-lived', 'test', { expiresAt: new Date(Date.now() + 3_600_000) })
  for (let i = 1; i < ACTIVE_KEY_LIMIT; i++) await keys.create(owner, `key ${i}`, 'test')
  await t.rejects(keys.create(owner, 'one too many', 'test'), { message: LIMIT_MESSAGE }, 'a key that has not expired yet counts')
  // Its expiry, brought forward to now (the database allows an expiry to move earlier, never later).
  await db.pool.query(`UPDATE api_keys SET expires_at = now() WHERE id = $1`, [shortLived.id])
  t.equal((await keys.find(shortLived.id))!.status, 'expired')
  t.ok((await keys.create(owner, 'after the expiry', 'test')).key, 'the expired key freed its place')
  await t.rejects(keys.create(owner, 'full again', 'test'), { message: LIMIT_MESSAGE })
})

t.test('roll: a new key like the old, the old one working until the end of its grace, not counted, not rolled twice', async (t) => {
  const tenants = await createTestTenants(db.pool, 'Roll')
  const owner: KeyOwner = { scope: 'SUB-ACCOUNT', subAccountId: tenants.subAccountId }
  const old = await keys.create(owner, 'billing sync', 'test', { allowedCidrs: ['203.0.113.0/24'] })
  const before = Date.now()
  const rolled = await keys.roll(old.id, 'ctl:alice', undefined, { graceSeconds: 3600 })
  const after = Date.now()
  t.match(rolled, {
    name: 'billing sync',
    scope: 'SUB-ACCOUNT',
    subAccountId: tenants.subAccountId,
    agencyId: tenants.agencyId,
    replaces: old.id,
    allowedCidrs: ['203.0.113.0/24'],
    expiresAt: null,
  })
  t.not(rolled.key, old.key)
  t.match(await keys.find(rolled.id), { status: 'active', replaces: old.id, replacedBy: null, countsTowardLimit: true })

  const oldNow = (await keys.find(old.id))!
  t.match(oldNow, { status: 'active', replacedBy: rolled.id, countsTowardLimit: false }, 'in its grace period: active, replaced, not counted')
  const graceEnd = Date.parse(oldNow.expiresAt!)
  t.ok(graceEnd >= before + 3_600_000 - 1000 && graceEnd <= after + 3_600_000 + 1000, 'expires at the end of the grace period')
  t.match(await lookupKeyByHash(db.pool, hashKey(old.key)), { status: 'active', expiresAt: graceEnd }, 'the gateways learn the instant')
  t.same(await invalidations(hashKey(old.key)), ['changed'], 'and were told to forget what they cached about it')

  await t.rejects(keys.roll(old.id, 'test'), { statusCode: 400, message: 'This key was already rolled; roll the key that replaced it instead' })
  const again = await keys.roll(rolled.id, 'test', owner)
  t.equal(again.replaces, rolled.id, 'the replacement can be rolled in turn')
  t.equal((await keys.find(rolled.id))!.status, 'expired', 'without a grace period the rolled key ends at once')
  const first = (await keys.find(old.id))!
  t.equal(first.status, 'expired', 'rolling its replacement ends the first key’s grace at once')
  t.ok(Date.parse(first.expiresAt!) < graceEnd, 'its expiry brought forward, never extended')
  t.same(await invalidations(hashKey(old.key)), ['changed', 'changed'], 'and the gateways were told to forget it again')

  const revoked = await keys.create(owner, 'revoked', 'test')
  await keys.revoke(revoked.id, 'test')
  await t.rejects(keys.roll(revoked.id, 'test'), { statusCode: 400, message: 'A revoked key cannot be rolled' })
  const expiring = await keys.create(owner, 'expiring', 'test', { expiresAt: new Date(Date.now() + 1500) })
  await new Promise((resolve) => setTimeout(resolve, Date.parse(expiring.expiresAt!) - Date.now() + 20))
  await t.rejects(keys.roll(expiring.id, 'test'), { statusCode: 400, message: 'An expired key cannot be rolled' })
  await t.rejects(keys.roll(old.id, 'test', { scope: 'SUB-ACCOUNT', subAccountId: tenants.otherSubAccountId }), {
    statusCode: 404,
    message: 'API key not found',
  })
  for (const grace of [-1, 2_592_001, 1.5, '60']) {
    await t.rejects(keys.roll(again.id, 'test', owner, { graceSeconds: grace }), { name: 'ApiError', statusCode: 400 }, `grace ${String(grace)}`)
  }
})

t.test('roll never extends an expiry: a key that expires sooner than the grace keeps its instant', async (t) => {
  const tenants = await createTestTenants(db.pool, 'Roll early')
  const owner: KeyOwner = { scope: 'AGENCY', agencyId: tenants.agencyId }
  const expiresAt = new Date(Date.now() + 60_000)
  const old = await keys.create(owner, 'ends soon', 'test', { expiresAt })
  await keys.roll(old.id, 'test', owner, { graceSeconds: 7 * 86_400 })
  t.equal((await keys.find(old.id))!.expiresAt, expiresAt.toISOString())
})

t.test('a roll carries the expiry policy: the new key lives as long from the roll as the old one was made to live', async (t) => {
  const tenants = await createTestTenants(db.pool, 'Roll lifetime')
  const owner: KeyOwner = { scope: 'SUB-ACCOUNT', subAccountId: tenants.subAccountId }
  const old = await keys.create(owner, 'quarterly', 'test', { expiresAt: new Date(Date.now() + 90 * 86_400_000), allowedCidrs: ['10.0.0.0/8'] })
  await db.pool.query(`UPDATE api_keys SET rate_limit_rate = 5, rate_limit_burst = 10 WHERE id = $1`, [old.id])
  const lifetime = Date.parse(old.expiresAt!) - Date.parse(old.createdAt)
  const rolled = await keys.roll(old.id, 'test', owner, { graceSeconds: 60 })
  // The database keeps microseconds, the service milliseconds: each instant may lose one.
  const near = (key: { createdAt: string; expiresAt: string | null }): boolean =>
    Math.abs(Date.parse(key.expiresAt!) - Date.parse(key.createdAt) - lifetime) <= 2
  t.ok(near(rolled), 'the same lifetime, from the roll')
  t.same(rolled.allowedCidrs, ['10.0.0.0/8'], 'the allowlist carried')
  t.same(rolled.rateLimit, { rate: 5, burst: 10 }, 'the rate limit carried')
  const again = await keys.roll(rolled.id, 'test', owner)
  t.ok(near(again), 'and down the chain')
  const endless = await keys.roll((await keys.create(owner, 'endless', 'test')).id, 'test', owner)
  t.equal(endless.expiresAt, null, 'a key without expiry is replaced by one without')
})

t.test('a roll never fails on the limit, and the rolled key gives its place to its replacement', async (t) => {
  const tenants = await createTestTenants(db.pool, 'Roll limit')
  const owner: KeyOwner = { scope: 'SUB-ACCOUNT', subAccountId: tenants.subAccountId }
  const ids: string[] = []
  for (let i = 0; i < ACTIVE_KEY_LIMIT; i++) ids.push((await keys.create(owner, `key ${i}`, 'test')).id)
  await t.rejects(keys.create(owner, 'one too many', 'test'), { message: LIMIT_MESSAGE })
  for (const id of ids.slice(0, 3)) {
    const rolled = await keys.roll(id, 'test', owner, { graceSeconds: 86_400 })
    t.ok(rolled.key, 'rolled at the limit')
  }
  const listed = await keys.list(owner)
  t.equal(listed.filter((key) => key.status === 'active').length, ACTIVE_KEY_LIMIT + 3, 'the rolled keys are still active in their grace period')
  t.equal(listed.filter((key) => key.countsTowardLimit).length, ACTIVE_KEY_LIMIT, 'but only 25 count')
  await t.rejects(keys.create(owner, 'still full', 'test'), { message: LIMIT_MESSAGE }, 'the replacements took the places')
})

t.test('allowlist changes: stored, the gateways told, refused for ended keys, recorded once', async (t) => {
  const tenants = await createTestTenants(db.pool, 'Allowlist')
  const owner: KeyOwner = { scope: 'SUB-ACCOUNT', subAccountId: tenants.subAccountId }
  const created = await keys.create(owner, 'office only', 'test')
  const hash = hashKey(created.key)
  t.same((await keys.find(created.id))!.allowedCidrs, [], 'none: any address')
  const updated = await keys.update(created.id, { actor: 'user:u1', owner, allowedCidrs: ['198.51.100.0/24', '::ffff:192.0.2.1', '2001:DB8::/48'] })
  t.same(updated.allowedCidrs, ['198.51.100.0/24', '192.0.2.1/32', '2001:db8::/48'])
  t.same((await lookupKeyByHash(db.pool, hash)) as object, {
    status: 'active',
    tenant: { scope: 'SUB-ACCOUNT', agencyId: tenants.agencyId, subAccountId: tenants.subAccountId, keyId: created.id },
    allowedCidrs: ['198.51.100.0/24', '192.0.2.1/32', '2001:db8::/48'],
    version: 2,
  })
  t.same(await invalidations(hash), ['changed'])
  await keys.update(created.id, { actor: 'user:u1', owner, allowedCidrs: ['198.51.100.0/24', '192.0.2.1', '2001:db8::/48'] })
  t.same(await invalidations(hash), ['changed'], 'the same list again changes nothing')
  await keys.update(created.id, { actor: 'user:u1', owner, allowedCidrs: [] })
  t.same((await keys.find(created.id))!.allowedCidrs, [], 'and back to any address')
  t.same(await invalidations(hash), ['changed', 'changed'])
  const events = await db.pool.query(`SELECT type FROM audit_events WHERE key_id = $1 ORDER BY seq`, [created.id])
  t.same(events.rows, [{ type: 'key.created' }, { type: 'key.updated' }, { type: 'key.updated' }])

  await t.rejects(keys.update(created.id, { actor: 'test', owner, allowedCidrs: ['nonsense'] }), {
    statusCode: 400,
    message: 'allowedCidrs[0] "nonsense" is not an IP address or CIDR block',
    field: 'allowedCidrs',
  })
  await keys.revoke(created.id, 'test')
  await t.rejects(keys.update(created.id, { actor: 'test', allowedCidrs: ['10.0.0.0/8'] }), {
    statusCode: 400,
    message: 'The addresses of a revoked key cannot be changed',
  })
})

t.test('last use: the newest time and its client address, batched; an older flush never moves either back', async (t) => {
  const tenants = await createTestTenants(db.pool, 'Last use')
  const created = await keys.create({ scope: 'SUB-ACCOUNT', subAccountId: tenants.subAccountId }, 'used', 'test')
  const other = await keys.create({ scope: 'SUB-ACCOUNT', subAccountId: tenants.subAccountId }, 'used too', 'test')
  const first = new Date('2030-01-01T00:00:00.000Z')
  const second = new Date('2030-01-01T00:00:05.000Z')
  await recordLastUse(
    db.pool,
    new Map([
      [created.id, { at: second, ip: '2001:db8::7' }],
      [other.id, { at: first, ip: '::ffff:198.51.100.9' }],
    ]),
  )
  await recordLastUse(db.pool, new Map([[created.id, { at: first, ip: '203.0.113.1' }]]))
  t.match(await keys.find(created.id), { lastUsedAt: second.toISOString(), lastUsedIp: '2001:db8::7' })
  t.match(await keys.find(other.id), { lastUsedAt: first.toISOString(), lastUsedIp: '198.51.100.9' }, 'an IPv4-mapped address as IPv4')
  await recordLastUse(db.pool, new Map([[other.id, second]]))
  t.match(await keys.find(other.id), { lastUsedAt: second.toISOString(), lastUsedIp: '198.51.100.9' }, 'a use without an address keeps the last one known')
  t.same(await invalidations(hashKey(created.key)), [], 'last use never invalidates the gateways’ caches')
})

t.test('the database guards the record: scope, tenant, name, what a key replaced, and an expiry that only moves earlier', async (t) => {
  const tenants = await createTestTenants(db.pool, 'Guards')
  const owner: KeyOwner = { scope: 'SUB-ACCOUNT', subAccountId: tenants.subAccountId }
  const expiresAt = new Date(Date.now() + 86_400_000)
  const created = await keys.create(owner, 'guarded', 'test', { expiresAt })
  const update = (sql: string) => db.pool.query(`UPDATE api_keys SET ${sql} WHERE id = $1`, [created.id])
  await t.rejects(update(`expires_at = expires_at + interval '1 day'`), /only ever brought forward/, 'extended')
  await t.rejects(update(`expires_at = NULL`), /only ever brought forward/, 'removed')
  await t.resolves(update(`expires_at = expires_at - interval '1 hour'`), 'brought forward')
  await t.rejects(update(`replaces = gen_random_uuid()`), /never change/, 'what a key replaced')
  await t.resolves(update(`name = 'renamed'`), 'a key may be renamed (migration 016)')
  const rolled = await keys.roll(created.id, 'test', owner, { graceSeconds: 60 })
  await t.rejects(update(`replaced_by = NULL`), /stays rolled/)
  await t.rejects(db.pool.query(`UPDATE api_keys SET replaced_by = gen_random_uuid() WHERE id = $1`, [created.id]), /stays rolled/)
  await t.resolves(update(`allowed_cidrs = '{10.0.0.0/8}'`), 'the allowlist may change')
  await t.resolves(update(`last_used_at = now(), last_used_ip = '10.0.0.1'`), 'and the last use')
  await t.rejects(
    db.pool.query(
      `INSERT INTO api_keys (scope, agency_id, sub_account_id, name, key_hash, hint, created_by, replaces) VALUES ('SUB-ACCOUNT', $1, $2, 'dup', md5('a') || md5('b'), 'h', 't', $3)`,
      [tenants.agencyId, tenants.subAccountId, created.id],
    ),
    /api_keys_replaces/,
    'a key is replaced once',
  )
  await t.rejects(
    db.pool.query(`UPDATE api_keys SET allowed_cidrs = '{10.1.0.0/8}' WHERE id = $1`, [rolled.id]),
    /invalid cidr value/i,
    'Postgres refuses a block with host bits',
  )
})

t.test('the audit trail: every key and sub-account event with who and from where; append-only; no plaintext, no hash', async (t) => {
  const tenants = await createTestTenants(db.pool, 'Audit')
  const owner: KeyOwner = { scope: 'SUB-ACCOUNT', subAccountId: tenants.subAccountId }
  const user = userActor('00000000-0000-4000-8000-00000000000a', '203.0.113.5')
  const created = await keys.create(owner, 'audited', user)
  const rolled = await keys.roll(created.id, 'ctl:alice', owner, { graceSeconds: 60 })
  await keys.update(rolled.id, { actor: keyActor('00000000-0000-4000-8000-00000000000b', '::ffff:198.51.100.7'), owner, allowedCidrs: ['10.0.0.0/8'] })
  await keys.revoke(rolled.id, user, owner)
  await keys.delete(created.id, user, owner)
  const store = new SubAccountStore(db.pool, keys)
  const sub = await store.create(tenants.agencyId, 'Temporary', keyActor('00000000-0000-4000-8000-00000000000b', '2001:db8::1'))
  const doomedKey = await keys.create({ scope: 'SUB-ACCOUNT', subAccountId: sub.id }, 'doomed', 'test')
  const pending = await store.delete(tenants.agencyId, sub.id, keyActor('00000000-0000-4000-8000-00000000000b', '2001:db8::1'))
  await keys.invalidate(pending!, 'deleted')

  const page = await new AuditLog(db.pool).list({ agencyId: tenants.agencyId }, {}, { limit: 100 })
  const trail = page.data.map((event) => [event.type, event.keyId ?? event.subAccountId, event.actor.kind, event.actor.id, event.clientAddress])
  t.same(trail.reverse(), [
    ['sub-account.created', tenants.subAccountId, 'cli', 'system', null],
    ['sub-account.created', tenants.otherSubAccountId, 'cli', 'system', null],
    ['key.created', created.id, 'user', '00000000-0000-4000-8000-00000000000a', '203.0.113.5'],
    ['key.created', rolled.id, 'cli', 'ctl:alice', null],
    ['key.rolled', created.id, 'cli', 'ctl:alice', null],
    ['key.updated', rolled.id, 'key', '00000000-0000-4000-8000-00000000000b', '198.51.100.7'],
    ['key.revoked', rolled.id, 'user', '00000000-0000-4000-8000-00000000000a', '203.0.113.5'],
    ['key.deleted', created.id, 'user', '00000000-0000-4000-8000-00000000000a', '203.0.113.5'],
    ['sub-account.created', sub.id, 'key', '00000000-0000-4000-8000-00000000000b', '2001:db8::1'],
    ['key.created', doomedKey.id, 'cli', 'test', null],
    ['key.deleted', doomedKey.id, 'key', '00000000-0000-4000-8000-00000000000b', '2001:db8::1'],
    ['sub-account.deleted', sub.id, 'key', '00000000-0000-4000-8000-00000000000b', '2001:db8::1'],
  ])
  const subOnly = await new AuditLog(db.pool).list({ subAccountId: tenants.subAccountId }, {}, { limit: 100 })
  t.ok(
    subOnly.data.every((event) => event.subAccountId === tenants.subAccountId),
    'a sub-account’s trail is its own',
  )
  t.equal((await new AuditLog(db.pool).list({ agencyId: tenants.agencyId }, { type: 'key.rolled' }, { limit: 100 })).data.length, 1)
  t.equal((await new AuditLog(db.pool).list({ agencyId: tenants.agencyId }, { keyId: created.id }, { limit: 100 })).data.length, 3)

  const dump = JSON.stringify((await db.pool.query(`SELECT * FROM audit_events`)).rows)
  for (const key of [created, rolled, doomedKey]) {
    t.notOk(dump.includes(key.key.slice(9, 30)), 'no part of a plaintext')
    t.notOk(dump.includes(hashKey(key.key)), 'no hash')
  }
  for (const sql of [
    `UPDATE audit_events SET actor_id = 'someone else'`,
    `DELETE FROM audit_events`,
    `DELETE FROM audit_events WHERE false`,
    `TRUNCATE audit_events`,
    `DELETE FROM api_key_events`,
  ]) {
    await t.rejects(db.pool.query(sql), /append-only/, sql)
  }
  t.equal((await db.pool.query(`SELECT count(*)::int AS n FROM audit_events WHERE agency_id = $1`, [tenants.agencyId])).rows[0].n, 12, 'nothing was changed')
})

t.test('the audit trail pages newest first, with a cursor, and filters by time', async (t) => {
  const tenants = await createTestTenants(db.pool, 'Audit pages')
  const owner: KeyOwner = { scope: 'AGENCY', agencyId: tenants.agencyId }
  for (let i = 0; i < 7; i++) await keys.create(owner, `key ${i}`, 'test')
  const seen: string[] = []
  let cursor: string | undefined
  do {
    const page = await new AuditLog(db.pool).list(
      { agencyId: tenants.agencyId },
      { type: 'key.created' },
      { limit: 3, ...(cursor === undefined ? {} : { cursor }) },
    )
    t.ok(page.data.length <= 3)
    seen.push(...page.data.map((event) => event.at))
    cursor = page.pagination.nextCursor ?? undefined
  } while (cursor !== undefined)
  t.equal(seen.length, 7, 'every event once')
  t.same(seen, [...seen].sort().reverse(), 'newest first')
  const middle = new Date(seen[3]!)
  const since = await new AuditLog(db.pool).list({ agencyId: tenants.agencyId }, { type: 'key.created', since: middle }, { limit: 100 })
  const until = await new AuditLog(db.pool).list({ agencyId: tenants.agencyId }, { type: 'key.created', until: middle }, { limit: 100 })
  t.equal(since.data.length + until.data.length, 7, 'since is inclusive, until exclusive')
})

t.test('when the gateways cannot all confirm, a roll still answers the new key (and says so); an allowlist change answers 503', async (t) => {
  const tenants = await createTestTenants(db.pool, 'Unconfirmed')
  const owner: KeyOwner = { scope: 'SUB-ACCOUNT', subAccountId: tenants.subAccountId }
  const stuck = new KeyService(db.pool, {
    invalidate: async () => ({ confirmed: false, acknowledged: 0, unconfirmed: ['gateway-stuck'], problems: [] }),
    close: async () => undefined,
  })
  const old = await stuck.create(owner, 'rolled anyway', 'test')
  const rolled = await stuck.roll(old.id, 'test', owner, { graceSeconds: 0 })
  t.match(rolled.key, /^sak_live_/, 'the plaintext of the new key, which exists nowhere else')
  t.match(rolled.unconfirmed, /^The key was rolled, but not every gateway replica confirmed dropping it \(not confirmed by 1 replica\(s\): gateway-stuck\)/)
  t.equal((await keys.find(old.id))!.status, 'expired', 'the roll committed')
  await t.rejects(stuck.update(rolled.id, { actor: 'test', owner, allowedCidrs: ['10.0.0.0/8'] }), {
    statusCode: 503,
    message: /^The key’s addresses were changed, but not every gateway replica confirmed/,
  })
  t.same((await keys.find(rolled.id))!.allowedCidrs, ['10.0.0.0/8'], 'the change itself was saved')
})
