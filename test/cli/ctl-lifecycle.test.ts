/**
 * The key lifecycle past create, revoke and delete, from the operator CLI as
 * a process: --expires-in / --expires-at, --allow-cidr, key roll with
 * --grace, key update, the list's new fields, bad input (exit 1 and the
 * envelope on stderr), and CTL_ACTOR in the audit trail.
 */
import t from 'tap'
import { createTestDatabase } from '../helpers/database.js'
import { runCtl } from '../helpers/processes.js'

interface Created {
  id: string
}

t.test('the key lifecycle from the CLI: expiry, allowlists, roll with a grace period, list, and the audit trail', async (t) => {
  const db = await createTestDatabase(t)
  const env = { DATABASE_URL: db.url, CTL_ACTOR: 'alice' }
  const ok = async (args: string[]): Promise<Record<string, unknown>> => {
    const result = await runCtl(args, env)
    t.equal(result.status, 0, `ctl ${args.join(' ')} succeeds: ${result.stderr}`)
    t.equal(result.stdout.trim().split('\n').length, 1, 'one JSON document on stdout')
    return result.json as Record<string, unknown>
  }
  const fails = async (args: string[], message: string | RegExp): Promise<void> => {
    const result = await runCtl(args, env)
    t.equal(result.status, 1, `ctl ${args.join(' ')} fails with status 1`)
    t.equal(result.stdout, '', 'nothing on stdout')
    t.match(result.json, { success: false, message }, 'the error envelope on stderr')
  }
  const agency = (await ok(['agency', 'create', '--name', 'Lifecycle'])) as unknown as Created
  const sub = (await ok(['sub-account', 'create', '--agency', agency.id, '--name', 'West'])) as unknown as Created

  const before = Date.now()
  const expiring = await ok([
    'key',
    'create',
    '--sub-account',
    sub.id,
    '--name',
    'quarterly',
    '--expires-in',
    '90d',
    '--allow-cidr',
    '10.0.0.0/8',
    '--allow-cidr',
    '2001:DB8::/32',
  ])
  t.same(Object.keys(expiring).sort(), ['allowedCidrs', 'expiresAt', 'id', 'key', 'name', 'scope'])
  const expiresAt = Date.parse(String(expiring['expiresAt']))
  t.ok(expiresAt >= before + 90 * 86_400_000 && expiresAt <= Date.now() + 90 * 86_400_000, '--expires-in 90d: 90 days from now')
  t.same(expiring['allowedCidrs'], ['10.0.0.0/8', '2001:db8::/32'], 'the allowlist in its one spelling')
  const dated = await ok(['key', 'create', '--agency', agency.id, '--name', 'dated', '--expires-at', '2031-01-02T03:04:05+01:00'])
  t.equal(dated['expiresAt'], '2031-01-02T02:04:05.000Z', '--expires-at, with its offset')

  const rolling = await ok(['key', 'create', '--sub-account', sub.id, '--name', 'billing sync'])
  const rolled = await ok(['key', 'roll', String(rolling['id']), '--grace', '1h'])
  t.same(Object.keys(rolled).sort(), ['id', 'key', 'name', 'replaces', 'scope'])
  t.match(rolled, { name: 'billing sync', scope: 'SUB-ACCOUNT', replaces: rolling['id'], key: /^sak_live_/ })
  t.not(rolled['id'], rolling['id'])
  await fails(['key', 'roll', String(rolling['id'])], 'This key was already rolled; roll the key that replaced it instead')

  const listed = (await ok(['key', 'list', '--sub-account', sub.id])) as unknown as Array<Record<string, unknown>>
  const byId = new Map(listed.map((key) => [key['id'], key]))
  const old = byId.get(rolling['id'])!
  t.match(old, { status: 'active', replacedBy: rolled['id'] }, 'the rolled key: active in its grace period, replaced')
  const graceEnd = Date.parse(String(old['expiresAt']))
  t.ok(Math.abs(graceEnd - (Date.now() + 3_600_000)) < 60_000, 'expiresAt at the end of the grace period')
  t.match(byId.get(rolled['id']), { status: 'active', replacedBy: null, expiresAt: null })
  t.match(byId.get(expiring['id']), { status: 'active', allowedCidrs: ['10.0.0.0/8', '2001:db8::/32'] })
  t.notOk(JSON.stringify(listed).includes(String(rolled['key'])), 'never a plaintext')

  const now = await ok(['key', 'roll', String(rolled['id'])])
  t.equal(now['replaces'], rolled['id'])
  t.match(
    ((await ok(['key', 'list', '--sub-account', sub.id])) as unknown as Array<Record<string, unknown>>).find((key) => key['id'] === rolled['id']),
    {
      status: 'expired',
      replacedBy: now['id'],
    },
    'rolled without --grace: expired at once',
  )
  const zero = await ok(['key', 'roll', String(now['id']), '--grace', '0s'])
  t.equal(zero['replaces'], now['id'], '--grace 0s: the same as no grace')

  const updated = await ok(['key', 'update', String(zero['id']), '--allow-cidr', '198.51.100.0/24', '--allow-cidr', '::ffff:192.0.2.1'])
  t.same(updated, { id: zero['id'], allowedCidrs: ['198.51.100.0/24', '192.0.2.1/32'] })
  t.same(await ok(['key', 'update', String(zero['id']), '--allow-any']), { id: zero['id'], allowedCidrs: [] })

  await fails(['key', 'create', '--sub-account', sub.id, '--name', 'x', '--expires-in', '90'], /--expires-in must be an integer and a unit \(s, m, h or d\)/)
  await fails(['key', 'create', '--sub-account', sub.id, '--name', 'x', '--expires-in', '1.5h'], /--expires-in must be an integer and a unit/)
  await fails(
    ['key', 'create', '--sub-account', sub.id, '--name', 'x', '--expires-at', 'next tuesday'],
    /--expires-at must be an ISO 8601 date and time with an offset/,
  )
  await fails(['key', 'create', '--sub-account', sub.id, '--name', 'x', '--expires-at', '2020-01-01T00:00:00Z'], '--expires-at must be in the future')
  await fails(
    ['key', 'create', '--sub-account', sub.id, '--name', 'x', '--expires-in', '1d', '--expires-at', '2031-01-01T00:00:00Z'],
    /give --expires-in or --expires-at, not both/,
  )
  await fails(
    ['key', 'create', '--sub-account', sub.id, '--name', 'x', '--allow-cidr', '10.1.2.3/8'],
    '--allow-cidr[0] "10.1.2.3/8" has bits set after its prefix length; the block is 10.0.0.0/8',
  )
  await fails(
    ['key', 'create', '--sub-account', sub.id, '--name', 'x', '--allow-cidr', 'office'],
    '--allow-cidr[0] "office" is not an IP address or CIDR block',
  )
  await fails(['key', 'roll', String(zero['id']), '--grace', '31d'], '--grace must be from 0s to 30d')
  await fails(['key', 'roll', String(zero['id']), '--grace', 'soon'], /--grace must be an integer and a unit/)
  await fails(['key', 'roll'], /key roll needs a key id/)
  await fails(['key', 'roll', '00000000-0000-4000-8000-000000000000'], 'API key not found')
  await fails(['key', 'update', String(zero['id'])], /needs --allow-cidr C \(repeatable\) or --allow-any/)
  await fails(['key', 'update', String(zero['id']), '--allow-any', '--allow-cidr', '10.0.0.0/8'], /give --allow-cidr or --allow-any, not both/)
  await fails(['key', 'update', String(zero['id']), '--allow-cidr', 'nope'], '--allow-cidr[0] "nope" is not an IP address or CIDR block')
  t.equal((await ok(['key', 'revoke', String(expiring['id'])]))['status'], 'revoked')
  await fails(['key', 'update', String(expiring['id']), '--allow-any'], 'The addresses of a revoked key cannot be changed')
  await fails(['key', 'roll', String(expiring['id'])], 'A revoked key cannot be rolled')

  const { rows } = await db.pool.query<{ type: string; actor_kind: string; actor_id: string }>(
    `SELECT type, actor_kind, actor_id FROM audit_events WHERE agency_id = $1 ORDER BY seq`,
    [agency.id],
  )
  t.same(
    [...new Set(rows.map((row) => row.type))].sort(),
    ['key.created', 'key.revoked', 'key.rolled', 'key.updated', 'sub-account.created'],
    'every change is in the audit trail',
  )
  t.ok(
    rows.every((row) => row.actor_kind === 'cli' && row.actor_id === 'ctl:alice'),
    'as done by the CLI, naming CTL_ACTOR',
  )
})
