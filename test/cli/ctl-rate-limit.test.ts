/**
 * A key's own rate limit from the operator CLI as a process: `key create …
 * --rate R --burst B`, `key update K --rate R --burst B | --clear-rate-limit`
 * alone or with the allowlist flags, what each prints (only what was asked
 * about: the contract's `{"id","allowedCidrs"}` for an allowlist alone), the
 * list's items (`rateLimit` only for a key that has one), bad input (exit 1
 * and the envelope on stderr, nothing changed), the `changed` invalidation
 * and the `key.updated` event by CTL_ACTOR.
 */
import t from 'tap'
import { createTestDatabase } from '../helpers/database.js'
import { runCtl } from '../helpers/processes.js'

type Json = Record<string, unknown>

t.test('the rate limit of a key from the CLI: create, update, clear, list, refusals and the audit trail', async (t) => {
  const db = await createTestDatabase(t)
  const env = { DATABASE_URL: db.url, CTL_ACTOR: 'bob' }
  const ok = async (args: string[]): Promise<Json> => {
    const result = await runCtl(args, env)
    t.equal(result.status, 0, `ctl ${args.join(' ')} succeeds: ${result.stderr}`)
    t.equal(result.stdout.trim().split('\n').length, 1, 'one JSON document on stdout')
    return result.json as Json
  }
  const fails = async (args: string[], message: string | RegExp): Promise<void> => {
    const result = await runCtl(args, env)
    t.equal(result.status, 1, `ctl ${args.join(' ')} fails with status 1`)
    t.equal(result.stdout, '', 'nothing on stdout')
    t.match(result.json, { success: false, message }, `the error envelope on stderr: ${String(message)}`)
  }
  const stored = async (id: unknown) =>
    (await db.pool.query(`SELECT rate_limit_rate AS rate, rate_limit_burst AS burst FROM api_keys WHERE id = $1`, [id])).rows[0] as Json
  const changedEntries = async (id: unknown): Promise<number> =>
    (
      await db.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM key_invalidations i JOIN api_keys k ON k.key_hash = i.key_hash WHERE k.id = $1 AND i.state = 'changed'`,
        [id],
      )
    ).rows[0]!.n

  const agency = await ok(['agency', 'create', '--name', 'Limits'])
  const sub = await ok(['sub-account', 'create', '--agency', String(agency['id']), '--name', 'Limits West'])
  const subAccount = String(sub['id'])

  const limited = await ok(['key', 'create', '--sub-account', subAccount, '--name', 'bulk import', '--rate', '0.5', '--burst', '10'])
  t.same(Object.keys(limited).sort(), ['allowedCidrs', 'expiresAt', 'id', 'key', 'name', 'rateLimit', 'scope'])
  t.same(limited['rateLimit'], { rate: 0.5, burst: 10 }, 'the limit asked for')
  t.same(await stored(limited['id']), { rate: 0.5, burst: 10 })
  const plain = await ok(['key', 'create', '--sub-account', subAccount, '--name', 'plain'])
  t.same(Object.keys(plain).sort(), ['allowedCidrs', 'expiresAt', 'id', 'key', 'name', 'scope'], 'without --rate: the contract’s shape, unchanged')

  const listed = (await ok(['key', 'list', '--sub-account', subAccount])) as unknown as Json[]
  const byId = new Map(listed.map((item) => [item['id'], item]))
  t.same(byId.get(limited['id'])!['rateLimit'], { rate: 0.5, burst: 10 }, 'the list shows a key’s own limit')
  t.notOk('rateLimit' in byId.get(plain['id'])!, 'and nothing (not even null) for a key on the route defaults')
  t.same(
    Object.keys(byId.get(plain['id'])!).sort(),
    ['allowedCidrs', 'createdAt', 'expiresAt', 'id', 'lastUsedAt', 'lastUsedIp', 'name', 'permissions', 'replacedBy', 'revokedAt', 'scope', 'status'],
    'the contract’s item',
  )

  const before = await changedEntries(plain['id'])
  t.same(await ok(['key', 'update', String(plain['id']), '--rate', '50', '--burst', '100']), { id: plain['id'], rateLimit: { rate: 50, burst: 100 } })
  t.same(await stored(plain['id']), { rate: 50, burst: 100 })
  t.equal(await changedEntries(plain['id']), before + 1, 'a `changed` invalidation, as for an allowlist')
  t.same(
    await ok(['key', 'update', String(plain['id']), '--allow-cidr', '198.51.100.0/24']),
    { id: plain['id'], allowedCidrs: ['198.51.100.0/24'] },
    'an allowlist alone: exactly the contract’s output',
  )
  t.same(await stored(plain['id']), { rate: 50, burst: 100 }, 'the limit stays')
  t.same(
    await ok(['key', 'update', String(plain['id']), '--allow-any', '--rate', '2.5', '--burst', '5']),
    { id: plain['id'], allowedCidrs: [], rateLimit: { rate: 2.5, burst: 5 } },
    'both at once',
  )
  t.same(await ok(['key', 'update', String(plain['id']), '--clear-rate-limit']), { id: plain['id'], rateLimit: null }, 'cleared: null')
  t.same(await stored(plain['id']), { rate: null, burst: null })
  t.notOk(
    'rateLimit' in ((await ok(['key', 'list', '--sub-account', subAccount])) as unknown as Json[]).find((item) => item['id'] === plain['id'])!,
    'the list: back to the route defaults',
  )
  const changes = await changedEntries(plain['id'])
  t.same(await ok(['key', 'update', String(plain['id']), '--clear-rate-limit']), { id: plain['id'], rateLimit: null }, 'clearing again is no error')
  t.equal(await changedEntries(plain['id']), changes, 'and no change')

  const created = await db.pool.query(`SELECT count(*)::int AS n FROM api_keys`)
  const key = String(limited['id'])
  const limitRule = '--rate must be a number of tokens per second above 0 and at most 1000000'
  const burstRule = '--burst must be a whole number of tokens from 1 to 10000000'
  await fails(['key', 'update', key, '--rate', '5'], /^give --rate and --burst together\nusage: ctl/)
  await fails(['key', 'update', key, '--rate', '0', '--burst', '5'], limitRule)
  await fails(['key', 'update', key, '--rate', 'fast', '--burst', '5'], limitRule)
  await fails(['key', 'update', key, '--rate', '1e3', '--burst', '5'], limitRule)
  await fails(['key', 'update', key, '--rate=-1', '--burst', '5'], limitRule)
  await fails(['key', 'update', key, '--rate', '5', '--burst', '1.5'], burstRule)
  await fails(['key', 'update', key, '--rate', '5', '--burst', '10000001'], burstRule)
  await fails(['key', 'update', key, '--rate'], /--rate/)
  await fails(['key', 'update', key, '--rate', '5', '--burst', '5', '--clear-rate-limit'], /^give --rate and --burst, or --clear-rate-limit, not both/)
  await fails(
    ['key', 'update', key],
    /^key update needs --allow-cidr C \(repeatable\) or --allow-any, --rate R --burst B or --clear-rate-limit, or --permission P/,
  )
  await fails(['key', 'create', '--sub-account', subAccount, '--name', 'x', '--rate', '0', '--burst', '5'], limitRule)
  await fails(['key', 'create', '--sub-account', subAccount, '--name', 'x', '--clear-rate-limit'], /^--clear-rate-limit is for key update/)
  t.same((await db.pool.query(`SELECT count(*)::int AS n FROM api_keys`)).rows, created.rows, 'nothing was created')
  t.same(await stored(key), { rate: 0.5, burst: 10 }, 'nothing was changed')
  t.equal((await ok(['key', 'revoke', key]))['status'], 'revoked')
  await fails(['key', 'update', key, '--rate', '5', '--burst', '5'], 'The rate limit of a revoked key cannot be changed')

  const { rows } = await db.pool.query<{ type: string; key_id: string; actor_kind: string; actor_id: string }>(
    `SELECT type, key_id, actor_kind, actor_id FROM audit_events WHERE type = 'key.updated' ORDER BY seq`,
  )
  t.equal(rows.length, 4, 'one key.updated per change: set, allowlist, both, clear (not the repeated clear)')
  t.ok(
    rows.every((row) => row.key_id === plain['id'] && row.actor_kind === 'cli' && row.actor_id === 'ctl:bob'),
    'as done by the CLI, naming CTL_ACTOR',
  )
})
